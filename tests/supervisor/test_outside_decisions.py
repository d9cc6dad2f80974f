"""What the Supervisor decides about a task Temporal says was not left to sas (``decide.outside``):
the pure rules the orphan check acts on, checked without a server (the end-to-end cases are in
tests/supervisor/test_detections.py and tests/e2e/test_mirror_follows_temporal.py)."""

from __future__ import annotations

from sas.supervisor.decide import closed_from_outside, history_gone, workflow_stuck
from sas.supervisor.decide.outside import Closed
from sas.supervisor.models import AlertSpec


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


# Each decision pinned whole, word for word, the stuck threshold at its edge (the cases
# `python -m bench.mutation outside` found no test held; docs/testing.md, "Mutation testing").


def test_a_task_closed_from_outside_past_its_pivot_says_what_to_do_in_full() -> None:
    assert closed_from_outside("o-6", "Processing", "terminated", "ship", ["reserve", "ship"]) == Closed(
        undo=False,
        reason="workflow terminated past its point of no return (ship); nothing undone",
        alert=AlertSpec(
            severity="critical",
            kind="closed_past_pivot",
            message=(
                "task o-6: its workflow was terminated from outside past its point of no return (ship);"
                " nothing was undone"
            ),
            suggested_action=(
                "finish it by hand (`sas show o-6`: what was done), or resubmit it "
                "(`sas resubmit o-6 --reason ...`); then `sas alerts resolve`"
            ),
        ),
    )


def test_a_task_closed_from_outside_before_its_pivot_says_what_is_undone_in_full() -> None:
    assert closed_from_outside("o-7", "Processing", "failed", None, ["reserve", "charge"]) == Closed(
        undo=True,
        reason="workflow failed while the mirror says Processing; undoing reserve, charge in cleanup-o-7",
        alert=AlertSpec(
            severity="critical",
            kind="workflow_closed",
            message="task o-7: its workflow was failed from outside while the mirror said Processing",
            suggested_action=(
                "completed steps (reserve, charge) are being undone by cleanup-o-7; "
                "find out who closed it; resubmit under a new id if the customer still wants it"
            ),
        ),
    )


def test_a_history_gone_says_what_to_do_in_full() -> None:
    assert history_gone("o-8", "Compensating") == AlertSpec(
        severity="critical",
        kind="history_gone",
        message=(
            "task o-8: Temporal no longer knows its workflow (history expired or the namespace was "
            "reset) while the mirror says Compensating; nothing was undone"
        ),
        suggested_action=(
            "check the remote services' records for o-8 (`sas show o-8`); "
            "undo by hand what must be undone, then `sas alerts resolve`"
        ),
    )


def test_a_stuck_workflow_is_told_from_its_threshold_on_in_full() -> None:
    assert workflow_stuck("o-9", 2, 3) is None
    stuck = AlertSpec(
        severity="critical",
        kind="workflow_stuck",
        message=(
            "task o-9: its workflow task keeps failing (attempt 3), so it cannot make progress "
            "(usually new workflow code that does not match its history: a non-determinism error)"
        ),
        suggested_action=(
            "see the WorkflowTaskFailed event in the Temporal UI; deploy the previous worker version, or fix the "
            "change with workflow.patched (docs/replay.md), or reset the workflow to an earlier event"
        ),
    )
    assert workflow_stuck("o-9", 3, 3) == stuck
    assert workflow_stuck("o-9", 4, 3) == stuck.model_copy(
        update={"message": stuck.message.replace("attempt 3", "attempt 4")}
    )
