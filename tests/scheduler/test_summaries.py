"""What the Temporal UI shows of the new step kinds: the flow in one line, each step's kind,
and what a Waiting or Skipped step is about."""

from __future__ import annotations

from datetime import UTC, datetime

from sas.task_models import StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.summaries import current_details, task_details, task_summary
from tests.scheduler.kinds import APPROVED_TRIP, PIVOT_TRIP, TRIP


def test_the_summary_draws_parallel_groups() -> None:
    assert task_summary(TRIP, "t-1", {}).endswith("(flight ‖ hotel) → charge → insure")
    assert task_summary(APPROVED_TRIP, "t-2", {}).endswith("approval → (flight ‖ hotel) → charge")


def test_the_details_say_each_steps_kind() -> None:
    details = task_details(APPROVED_TRIP, "t-2", {})
    assert "**approval**: waits for `approve` (at most 3 days, 0:00:00; then compensate)" in details
    assert "**hotel**: `testinn.book`, undone by `testinn.cancel` · in parallel (stage 2)" in details
    assert "only if not: no insurance asked for" in task_details(TRIP, "t-1", {})


def test_the_summary_and_details_show_the_pivot_and_what_comes_after_it() -> None:
    assert task_summary(PIVOT_TRIP, "t-3", {}).endswith("(flight ‖ hotel) → charge (pivot) → cover")
    details = task_details(PIVOT_TRIP, "t-3", {})
    assert "**charge**: `testcard.charge` · **the pivot**: once attempted, the task only goes forward" in details
    assert "**cover**: `testcover.cover` · forward only: retried and parked, never undone" in details
    assert "Past the pivot **charge** it only goes forward" in details and "--force --reason" in details
    assert "pivot" not in task_details(TRIP, "t-1", {})


def test_current_details_say_what_a_step_waits_for_and_why_one_was_skipped() -> None:
    note = "waits for 'approve' until 2026-11-28 10:00 UTC; then the task is undone"
    status = TaskStatus(
        task_id="t-3",
        task_type="approved_trip",
        state=TaskState.PROCESSING,
        current_step="approval",
        steps=[
            StepStatus(
                name="approval",
                position=0,
                state=StepState.WAITING,
                runs=1,
                note=note,
                wait_until=datetime(2026, 11, 28, 10, tzinfo=UTC),
            ),
            StepStatus(name="insure", position=1, state=StepState.SKIPPED, note="skipped: no insurance asked for"),
        ],
    )
    shown = current_details(status)
    assert f"**Waiting:** approval {note}" in shown
    assert "**Next:** waiting: approval waits for 'approve'" in shown
    assert "insure**: Skipped · run 0 · FailureCount 0 · skipped: no insurance asked for" in shown
