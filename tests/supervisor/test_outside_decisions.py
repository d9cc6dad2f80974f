"""What the Supervisor decides about a task Temporal says was not left to sas (``decide.outside``):
the pure rules the orphan check acts on, checked without a server (the end-to-end cases are in
tests/supervisor/test_detections.py and tests/e2e/test_mirror_follows_temporal.py)."""

from __future__ import annotations

from sas.supervisor.decide import closed_from_outside, history_gone, workflow_stuck


def test_a_task_closed_from_outside_before_its_pivot_is_undone_step_by_step() -> None:
    closed = closed_from_outside("o-1", "Processing", "terminated", None, ["reserve", "charge"])
    assert closed.undo
    assert closed.alert.kind == "workflow_closed"
    assert "undoing reserve, charge in cleanup-o-1" in closed.reason
    assert "(reserve, charge)" in closed.alert.suggested_action


def test_a_task_closed_from_outside_past_its_pivot_is_never_undone() -> None:
    closed = closed_from_outside("o-2", "Processing", "terminated", "ship", ["reserve", "charge", "ship"])
    assert not closed.undo
    assert closed.alert.kind == "closed_past_pivot"
    assert "past its point of no return (ship)" in closed.alert.message


def test_nothing_done_is_said_as_nothing() -> None:
    closed = closed_from_outside("o-3", "Processing", "failed", None, [])
    assert closed.undo
    assert "undoing nothing" in closed.reason
    assert "(none)" in closed.alert.suggested_action


def test_a_history_gone_is_one_alert_and_no_undo() -> None:
    spec = history_gone("o-4", "Processing")
    assert spec.kind == "history_gone"
    assert "nothing was undone" in spec.message


def test_a_workflow_task_failing_is_stuck_from_its_threshold_on() -> None:
    assert workflow_stuck("o-5", 1, 2) is None
    spec = workflow_stuck("o-5", 2, 2)
    assert spec is not None
    assert spec.kind == "workflow_stuck"
    assert "attempt 2" in spec.message
