"""The Scheduler's pure core as plain Python, with property-based tests: no step is undone
that was never attempted, undo order is the reverse of completion order (unfinished first),
and a request applies only when its validator would accept it - and a copy of it never does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sas.task_models import OperatorRequest, StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.core.machine import PlanStep, TaskCore
from sas.workflows.core.requests import (
    compensate_problem,
    complete_problem,
    park_problem,
    retry_problem,
    retry_with_input_problem,
    skip_problem,
    target_step,
)

NAMES = ["a", "b", "c", "d", "e", "f"]


@st.composite
def cores(draw: st.DrawFn) -> TaskCore:
    """A task part-way through its stages: some steps completed (in some order), some attempted
    and failed or parked, the rest never started."""
    count = draw(st.integers(1, 6))
    stages = draw(st.lists(st.integers(0, 2), min_size=count, max_size=count))
    plan, stage = [], 0
    for position, grow in enumerate(stages):
        stage = stage if grow == 0 and position else position
        plan.append(PlanStep(NAMES[position], position, stage))
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in plan],
    )
    core = TaskCore(status, plan, accepted=True)
    for name in draw(st.permutations([p.name for p in plan])):
        fate = draw(st.sampled_from(["pending", "done", "failed", "parked", "running"]))
        if fate == "pending":
            continue
        core.start(name)
        core.step(name).failure_count = draw(st.integers(0, 5))
        if fate == "done":
            core.done(name)
        elif fate == "failed":
            core.record_failure(name, StepState.FAILED, "no", "Refused", True)
        elif fate == "parked":
            core.set(name, StepState.ERROR, TaskState.ERROR)
    return core


requests = st.builds(
    OperatorRequest,
    step=st.one_of(st.none(), st.sampled_from(NAMES)),
    failure_count=st.one_of(st.none(), st.integers(0, 8)),
    decision_id=st.one_of(st.none(), st.just("1")),
)


@given(cores())
def test_only_attempted_steps_are_undone_unfinished_first_then_latest_completed_first(core: TaskCore) -> None:
    order = core.undo_order()
    attempted = {s.name for s in core.status.steps if s.runs > 0}
    assert set(order) == attempted
    assert len(order) == len(set(order))
    unfinished = [n for n in order if n not in core.completed]
    assert order == unfinished + list(reversed(core.completed))


@given(cores())
def test_stages_cover_every_step_once_in_position_order(core: TaskCore) -> None:
    flat = [name for stage in core.stages() for name in stage]
    assert flat == [p.name for p in sorted(core.plan, key=lambda p: p.position)]


@settings(max_examples=300)
@given(cores(), requests)
def test_a_retry_applies_to_exactly_one_waiting_step_and_never_twice(core: TaskCore, request: OperatorRequest) -> None:
    problem = retry_problem(core, request)
    if problem is not None:
        return
    target = target_step(core, request.step)
    assert target.state in (StepState.FAILED, StepState.COMPENSATION_FAILED, StepState.ERROR)
    assert request.step in (None, target.name)
    assert request.failure_count is None or request.failure_count > target.failure_count
    # What the shell does with it: the count is claimed, the decision queued. A copy is refused.
    core.claim_count(target.name, request)
    core.queue(target.name, "retry", request)
    assert retry_problem(core, request) is not None


@settings(max_examples=300)
@given(cores(), requests)
def test_a_stale_decision_never_applies(core: TaskCore, request: OperatorRequest) -> None:
    if request.failure_count is None or request.step is None or request.step not in core.names():
        return
    if request.failure_count <= core.step(request.step).failure_count:
        assert retry_problem(core, request) is not None
        assert park_problem(core, request) is not None
        assert compensate_problem(core, request) is not None


@given(cores(), requests)
def test_no_supervisor_compensate_applies_once_compensation_began(core: TaskCore, request: OperatorRequest) -> None:
    core.begin_compensation(OperatorRequest(by="alice"))
    if request.failure_count is not None:
        assert compensate_problem(core, request) is not None


def test_nothing_applies_to_a_finished_task() -> None:
    core = TaskCore(
        TaskStatus(task_id="t", task_type="x", state=TaskState.PROCESSED, steps=[StepStatus(name="a", position=0)]),
        [PlanStep("a", 0, 0)],
        accepted=True,
    )
    for check in (retry_problem, compensate_problem, park_problem):
        assert check(core, OperatorRequest()) == "the task is already Processed"


def test_two_waiting_steps_need_a_name() -> None:
    plan = [PlanStep("a", 0, 0), PlanStep("b", 1, 0)]
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.FAILED,
        steps=[StepStatus(name="a", position=0), StepStatus(name="b", position=1)],
    )
    core = TaskCore(status, plan, accepted=True)
    for name in ("a", "b"):
        core.start(name)
        core.record_failure(name, StepState.FAILED, "no", "Refused", True)
    assert retry_problem(core, OperatorRequest()) == "steps a, b wait for a decision: name one (--step)"
    assert retry_problem(core, OperatorRequest(step="b")) is None


def a_done_b_started(plan: list[PlanStep]) -> TaskCore:
    """A task of ``plan`` whose step a completed and whose step b is running."""
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in plan],
    )
    core = TaskCore(status, plan, accepted=True)
    core.start("a")
    core.done("a")
    core.start("b")
    return core


def test_a_last_step_completing_after_undoing_began_leaves_the_task_compensating() -> None:
    plan = [PlanStep("a", 0, 0), PlanStep("b", 1, 1)]
    core = a_done_b_started(plan)
    core.begin_compensation(OperatorRequest(by="ops", reason="customer called"))
    # b's attempt was cancelled, but its call had landed: it completes all the same.
    assert core.done("b") == TaskState.COMPENSATING
    assert core.status.state == TaskState.COMPENSATING
    assert core.undo_order() == ["b", "a"]


def test_once_undoing_began_a_retry_names_only_an_undo_never_a_failed_forward_step() -> None:
    plan = [PlanStep("a", 0, 0), PlanStep("b", 1, 1)]
    core = a_done_b_started(plan)
    core.record_failure("b", StepState.FAILED, "no", "Refused", True)
    core.begin_compensation(OperatorRequest(by="ops", reason="customer called"))
    # b is undone with the others: a retry of it would later be taken by its undo, undecided.
    assert retry_problem(core, OperatorRequest(by="ops", step="b")) == "step b is Failed, not waiting for a decision"
    assert retry_problem(core, OperatorRequest(by="ops")) is not None
    # As runs from before took it (the shell replays them so, behind a patch).
    assert retry_problem(core, OperatorRequest(by="ops", step="b"), forward_while_undoing=True) is None
    core.start("a", StepState.COMPENSATING)
    core.record_failure("a", StepState.COMPENSATION_FAILED, "down", "RemoteTransient", False)
    assert retry_problem(core, OperatorRequest(by="ops")) is None
    assert target_step(core, None, undo=True).name == "a"


def test_a_step_is_completed_by_hand_only_going_forward_and_past_the_pivot_only_forced() -> None:
    plan = [
        PlanStep("a", 0, 0, pivot="pivot"),
        PlanStep("b", 1, 1, pivot="forward_only"),
        PlanStep("w", 2, 2, wait=True),
    ]
    core = a_done_b_started(plan)
    core.record_failure("b", StepState.FAILED, "no", "Refused", True)
    asked = OperatorRequest(step="b", by="ops", reason="issued at the desk")
    assert "past the point of no return" in str(complete_problem(core, asked))
    assert complete_problem(core, asked.model_copy(update={"force": True})) is None
    assert complete_problem(core, OperatorRequest(step="a", by="ops", reason="x")) == (
        "step a is Processed; the step waiting for a decision is b"
    )
    core.begin_compensation(OperatorRequest(by="ops", reason="customer called"))
    assert "the task is compensating" in str(complete_problem(core, asked.model_copy(update={"force": True})))


def test_a_step_is_retried_with_a_changed_input_only_going_forward_and_past_the_pivot_only_forced() -> None:
    plan = [PlanStep("a", 0, 0, pivot="pivot"), PlanStep("b", 1, 1, pivot="forward_only")]
    core = a_done_b_started(plan)
    core.record_failure("b", StepState.FAILED, "bad address", "RemoteRejected", True)
    asked = OperatorRequest(step="b", by="ops", reason="customer called")
    past = str(retry_with_input_problem(core, asked))
    assert "past the point of no return" in past and "to retry b with a changed input anyway: --force" in past
    assert retry_with_input_problem(core, asked.model_copy(update={"force": True})) is None
    assert retry_with_input_problem(core, OperatorRequest(step="a", by="ops", reason="x")) == (
        "step a is Processed; the step waiting for a decision is b"
    )
    core.begin_compensation(OperatorRequest(by="ops", reason="customer cancelled"))
    undoing = str(retry_with_input_problem(core, asked.model_copy(update={"force": True})))
    assert (
        undoing == "the task is compensating: a step is retried with a changed input only while the task goes forward"
    )


def test_a_step_is_skipped_only_where_its_type_allows_going_forward_and_past_the_pivot_only_forced() -> None:
    plan = [
        PlanStep("a", 0, 0, pivot="pivot"),
        PlanStep("b", 1, 1, pivot="forward_only", skippable=True),
        PlanStep("c", 2, 2, pivot="forward_only"),
    ]
    core = a_done_b_started(plan)
    core.record_failure("b", StepState.FAILED, "printer out", "RemoteRejected", True)
    asked = OperatorRequest(step="b", by="ops", reason="sent without a note")
    past = str(skip_problem(core, asked))
    assert "past the point of no return" in past and "to skip b anyway: --force" in past
    forced = asked.model_copy(update={"force": True})
    assert skip_problem(core, forced) is None
    assert skip_problem(core, OperatorRequest(step="a", by="ops", reason="x")) == (
        "step a is Processed; the step waiting for a decision is b"
    )
    # Skipped: the task goes forward, the stage is done, and its undo is never run.
    core.skip_by_operator("b", "skipped by ops: sent without a note")
    assert core.step("b").state == StepState.SKIPPED and core.status.state == TaskState.PROCESSING
    assert core.stage_done(["b"]) and core.undo_order() == ["a"]
    # A step its type does not declare skippable is refused, forced or not.
    core.start("c")
    core.record_failure("c", StepState.FAILED, "no", "RemoteRejected", True)
    not_skippable = OperatorRequest(step="c", by="ops", reason="x", force=True)
    assert skip_problem(core, not_skippable) == "step c may not be skipped: its task type does not declare it skippable"
    core.begin_compensation(OperatorRequest(by="ops", reason="customer cancelled"))
    assert (
        str(skip_problem(core, forced))
        == "the task is compensating: a step is skipped only while the task goes forward"
    )
    assert core.undo_order() == ["c", "a"]
