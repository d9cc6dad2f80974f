"""The Scheduler's state machine (``workflows/core/machine.py``) pinned call by call: each change
of a step's status and what it leaves as it is, the task's state each call gives, the undo order
and the point of no return at their edges (the cases ``python -m bench.mutation machine`` found
no test held; docs/testing.md, "Mutation testing"). Pure, no server."""

from __future__ import annotations

from datetime import UTC, datetime

from sas.task_models import OperatorRequest, StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.core.machine import KEEP, PlanStep, TaskCore

WHEN = datetime(2030, 1, 1, tzinfo=UTC)


def core_of(*plan: PlanStep) -> TaskCore:
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in sorted(plan, key=lambda p: p.position)],
    )
    return TaskCore(status, list(plan), accepted=True)


def three() -> TaskCore:
    """a, then b and c side by side."""
    return core_of(PlanStep("a", 0, 0), PlanStep("b", 1, 1), PlanStep("c", 2, 1))


def pivoted() -> TaskCore:
    """a, the pivot b, then c and d only forward."""
    return core_of(
        PlanStep("a", 0, 0),
        PlanStep("b", 1, 1, pivot="pivot"),
        PlanStep("c", 2, 2, pivot="forward_only"),
        PlanStep("d", 3, 3, pivot="forward_only"),
    )


def req(failure_count: int | None = None, by: str = "ops") -> OperatorRequest:
    return OperatorRequest(failure_count=failure_count, by=by)


# ---------------------------------------------------------------- reading


def test_the_stages_are_the_plans_in_stage_then_position_order_whatever_its_order() -> None:
    core = core_of(PlanStep("c", 2, 1), PlanStep("b", 1, 1), PlanStep("a", 0, 0), PlanStep("d", 3, 2))
    assert core.stages() == [["a"], ["b", "c"], ["d"]]
    assert core.names() == ["a", "b", "c", "d"]
    assert core.planned("b") == PlanStep("b", 1, 1)


def test_the_steps_waiting_are_those_failed_undo_failed_or_parked_in_position_order() -> None:
    core = core_of(*(PlanStep(n, i, i) for i, n in enumerate("abcdef")))
    for name, state in zip(
        "abcdef",
        (
            StepState.ERROR,
            StepState.PROCESSING,
            StepState.COMPENSATION_FAILED,
            StepState.COMPENSATING,
            StepState.FAILED,
            StepState.WAITING,
        ),
        strict=True,
    ):
        core.step(name).state = state
    assert [s.name for s in core.waiting()] == ["a", "c", "e"]


def test_the_undo_takes_the_unfinished_latest_first_then_the_completed_in_reverse() -> None:
    core = core_of(*(PlanStep(n, i, i) for i, n in enumerate("abcdef")))
    for name in "abcdef":
        core.step(name).runs = 1
    core.completed = ["b", "a", "e"]
    core.step("a").state = core.step("b").state = StepState.PROCESSED
    core.step("e").state = StepState.COMPENSATED  # completed, then undone already
    core.step("c").state = StepState.FAILED
    core.step("d").state = StepState.SKIPPED  # run, then skipped: nothing to undo
    core.step("f").state = StepState.PROCESSING
    assert core.undo_order() == ["f", "c", "a", "b"]
    core.step("f").runs = 0  # never started: nothing it did
    assert core.undo_order() == ["c", "a", "b"]
    core.step("c").state = StepState.COMPENSATED
    assert core.undo_order() == ["a", "b"]


def test_no_pivot_means_never_past_it() -> None:
    core = three()
    core.step("a").runs = 1
    assert core.past_pivot() is None


def test_past_the_pivot_once_a_step_after_it_has_run_the_first_named() -> None:
    core = pivoted()
    core.step("d").runs = 1
    assert core.past_pivot() == "step d, after the pivot b, has run"
    core.step("c").runs = 1
    assert core.past_pivot() == "step c, after the pivot b, has run"


def test_the_pivot_attempted_is_past_it_unless_refused_for_good() -> None:
    core = pivoted()
    assert core.past_pivot() is None  # never run
    pivot = core.step("b")
    pivot.runs, pivot.state = 1, StepState.PROCESSING
    assert core.past_pivot() == "the pivot b has been attempted (Processing)"
    pivot.state, pivot.permanent = StepState.FAILED, False
    assert core.past_pivot() == "the pivot b has been attempted (Failed)"
    pivot.permanent = True
    assert core.past_pivot() is None  # the service said no: it did nothing
    pivot.state = StepState.ERROR
    assert core.past_pivot() is None
    pivot.state = StepState.PROCESSING  # retried after the refusal: it may do something now
    assert core.past_pivot() == "the pivot b has been attempted (Processing)"


def test_the_steps_never_started() -> None:
    core = three()
    core.step("b").runs = 1
    assert [s.name for s in core.never_started()] == ["a", "c"]


# ---------------------------------------------------------------- changing


def test_set_changes_only_what_it_is_given_and_none_clears() -> None:
    core = three()
    step = core.set("a", StepState.WAITING, note="waits", result={"x": 1}, wait_until=WHEN, waits_for="go")
    assert (step.state, step.note, step.result, step.wait_until, step.waits_for) == (
        StepState.WAITING,
        "waits",
        {"x": 1},
        WHEN,
        "go",
    )
    assert core.status.current_step is None and core.status.state == TaskState.PROCESSING
    same = core.set("a")
    assert same is step and same.state == StepState.WAITING and same.note == "waits" and same.waits_for == "go"
    core.set("a", note=None, result=None, wait_until=None, waits_for=None)
    assert (step.state, step.note, step.result, step.wait_until, step.waits_for) == (
        StepState.WAITING,
        None,
        None,
        None,
        None,
    )
    assert KEEP.value == "keep"


def test_set_with_a_task_state_makes_it_the_tasks_and_the_step_its_current() -> None:
    core = three()
    core.set("b", StepState.PROCESSING, TaskState.FAILED)
    assert (core.status.state, core.status.current_step) == (TaskState.FAILED, "b")
    core.set_task(TaskState.COMPENSATING)
    assert (core.status.state, core.status.current_step) == (TaskState.COMPENSATING, "b")


def test_a_step_processed_is_completed_once() -> None:
    core = three()
    core.set("b", StepState.PROCESSED)
    core.set("a", StepState.PROCESSED)
    core.set("b", StepState.PROCESSED)
    assert core.completed == ["b", "a"]


def test_the_forward_state_is_error_before_failed_before_processing() -> None:
    core = three()
    assert core.forward_state() == TaskState.PROCESSING
    core.step("b").state = StepState.FAILED
    assert core.forward_state() == TaskState.FAILED
    core.step("c").state = StepState.ERROR
    assert core.forward_state() == TaskState.ERROR


def test_a_start_counts_a_run_and_gives_the_task_its_forward_state() -> None:
    core = three()
    core.start("a")
    assert (core.step("a").runs, core.step("a").state) == (1, StepState.PROCESSING)
    assert (core.status.state, core.status.current_step) == (TaskState.PROCESSING, "a")
    core.step("b").state = StepState.FAILED  # its neighbour in the group waits for a decision
    waiting = core.start("c", StepState.WAITING)
    assert (waiting.runs, waiting.state, core.status.state) == (1, StepState.WAITING, TaskState.FAILED)
    core.start("c")
    assert core.step("c").runs == 2


def test_done_is_processed_for_the_last_step_and_compensating_while_undoing() -> None:
    core = three()
    assert core.done("a") == TaskState.PROCESSING
    core.step("c").state = StepState.FAILED
    assert core.done("b") == TaskState.FAILED  # c, beside it, waits for a decision
    assert (core.status.state, core.status.current_step) == (TaskState.FAILED, "b")
    core.step("c").state = StepState.SKIPPED
    core.step("b").state = StepState.PROCESSING
    assert core.done("b") == TaskState.PROCESSED
    assert core.completed == ["a", "b"]
    undoing = three()
    undoing.begin_compensation(req())
    assert undoing.done("a") == TaskState.COMPENSATING
    assert (undoing.step("a").state, undoing.status.state) == (StepState.PROCESSED, TaskState.COMPENSATING)


def test_a_failed_step_completed_by_hand_no_longer_fails_the_task() -> None:
    # An operator's complete (``request_complete``) finishes a step that waits as Failed: the task's
    # state is read once the step is Processed, not while it still reads Failed.
    core = three()
    core.record_failure("a", StepState.FAILED, "503", "RemoteTransient", False)
    assert core.done("a") == TaskState.PROCESSING
    assert (core.step("a").state, core.status.state, core.completed) == (
        StepState.PROCESSED,
        TaskState.PROCESSING,
        ["a"],
    )


def test_a_skip_says_why_and_is_never_completed() -> None:
    core = three()
    step = core.skip("b", "no gift wrap")
    assert (step.name, step.state, step.note) == ("b", StepState.SKIPPED, "no gift wrap")
    assert core.completed == [] and core.status.current_step is None


def test_a_step_an_operator_skips_says_who_and_why_and_the_task_goes_forward() -> None:
    core = three()
    core.record_failure("b", StepState.FAILED, "no", "Refused", True)
    step = core.skip_by_operator("b", "skipped by ops: not needed")
    assert (step.name, step.state, step.note) == ("b", StepState.SKIPPED, "skipped by ops: not needed")
    assert core.status.state == TaskState.PROCESSING and core.completed == []


def test_a_failure_is_recorded_and_fails_the_task_or_keeps_it_compensating() -> None:
    core = three()
    step, task_state = core.record_failure("a", StepState.FAILED, "503", "RemoteTransient", False)
    assert (step.name, step.last_error, step.error_type, step.permanent, step.state) == (
        "a",
        "503",
        "RemoteTransient",
        False,
        StepState.FAILED,
    )
    assert task_state == TaskState.FAILED and (core.status.state, core.status.current_step) == (TaskState.FAILED, "a")
    step, task_state = core.record_failure("b", StepState.COMPENSATION_FAILED, "no", "Refused", True)
    assert (step.state, step.permanent) == (StepState.COMPENSATION_FAILED, True)
    assert task_state == TaskState.COMPENSATING and core.status.state == TaskState.COMPENSATING


def test_a_stage_is_done_when_each_step_is_processed_or_skipped() -> None:
    core = three()
    assert not core.stage_done(["b", "c"])
    core.step("b").state = StepState.PROCESSED
    assert not core.stage_done(["b", "c"])
    core.step("c").state = StepState.SKIPPED
    assert core.stage_done(["b", "c"])
    assert core.stage_done([])


def test_a_step_is_the_last_when_it_is_in_the_last_stage_and_the_rest_of_it_is_done() -> None:
    core = three()
    assert not core.is_last("a")
    assert not core.is_last("b")
    core.step("c").state = StepState.PROCESSED
    assert core.is_last("b")
    core.step("c").state = StepState.SKIPPED
    assert core.is_last("b")
    core.step("c").state = StepState.FAILED
    assert not core.is_last("b")


# ---------------------------------------------------------------- decisions


def test_requests_are_queued_per_step_and_taken_first_in_first_out() -> None:
    core = three()
    first, second = req(by="one"), req(by="two")
    assert core.next_request("a") is None and not core.has_request("a")
    core.queue("a", "retry", first)
    core.queue("a", "park", second)
    assert core.has_request("a") and not core.has_request("b")
    assert core.next_request("a") == ("retry", first)
    assert core.next_request("a") == ("park", second)
    assert core.next_request("a") is None and not core.has_request("a")


def test_a_decisions_failure_count_is_claimed_never_down() -> None:
    core = three()
    core.claim_count("a", req(3))
    assert core.step("a").failure_count == 3
    core.claim_count("a", req(2))
    assert core.step("a").failure_count == 3
    core.claim_count("a", req())  # an operator's: no count to claim
    assert core.step("a").failure_count == 3
    core.claim_count("a", req(4))
    assert core.step("a").failure_count == 4
    assert core.task_failure_count() == 4


def test_a_resubmit_starts_the_count_again_and_says_what_it_was() -> None:
    core = three()
    core.step("b").failure_count = 5
    assert core.reset_failures("b") == 5
    assert core.step("b").failure_count == 0
    assert core.reset_failures("b") == 0


def test_a_parked_step_waits_as_error_and_the_task_needs_an_operator_until_answered() -> None:
    core = three()
    step = core.park("b")
    assert (step.name, step.state) == ("b", StepState.ERROR)
    assert (core.status.state, core.status.current_step, core.status.needs_operator) == (TaskState.ERROR, "b", True)
    core.operator_answered()
    assert core.status.needs_operator is False


def test_compensation_drops_the_queued_decisions() -> None:
    core = three()
    core.queue("a", "retry", req())
    core.queue("b", "park", req())
    assert not core.compensating
    undo = req(by="undo")
    core.begin_compensation(undo)
    assert core.compensating and core.compensation is undo and core.queued == {}


def test_a_tasks_failure_count_is_its_highest_steps_and_none_is_zero() -> None:
    core = three()
    assert core.task_failure_count() == 0
    core.step("a").failure_count, core.step("c").failure_count = 2, 7
    assert core.task_failure_count() == 7
    assert core_of().task_failure_count() == 0
