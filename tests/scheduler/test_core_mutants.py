"""The Scheduler core's rules pinned where mutation testing (``python -m bench.mutation``) found
them loose: every reason a request does not apply, word for word (the reason is what the
update's caller and the task's events are told, and which rule said no), each bound at its edge
(a FailureCount equal to the step's is stale, one above is not), and the machine's bookkeeping
that the property tests only read through other calls."""

from __future__ import annotations

import pytest

from sas.task_models import Approval, OperatorRequest, StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.core.machine import PlanStep, TaskCore
from sas.workflows.core.requests import (
    approval_problem,
    compensate_problem,
    complete_problem,
    park_problem,
    retry_problem,
    target_step,
)


def core_of(*plan: PlanStep, accepted: bool = True) -> TaskCore:
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in plan],
    )
    return TaskCore(status, list(plan), accepted=accepted)


def two_steps() -> TaskCore:
    return core_of(PlanStep("a", 0, 0), PlanStep("b", 1, 1))


def failed(core: TaskCore, name: str, count: int = 0, permanent: bool = True) -> None:
    core.start(name)
    core.record_failure(name, StepState.FAILED, "no", "Refused", permanent)
    core.step(name).failure_count = count


def by(step: str | None = None, failure_count: int | None = None, **more: object) -> OperatorRequest:
    return OperatorRequest(step=step, failure_count=failure_count, by="ops", **more)  # type: ignore[arg-type]


# ------------------------------------------------------------------ what every request checks first


def test_a_request_before_acceptance_says_so_and_one_naming_no_step_is_not_unknown() -> None:
    core = two_steps()
    core.accepted = False
    for check in (retry_problem, park_problem, complete_problem):
        assert check(core, by("a")) == "the task has not been accepted yet"
    core.accepted = True
    for check in (retry_problem, park_problem, complete_problem):
        assert check(core, by("z")) == "unknown step 'z'; the steps are a, b"
    # No step named: not an unknown one, but no step waiting.
    assert retry_problem(core, by()) == "no step is waiting for a decision (the task is Processing)"


def test_a_finished_task_names_its_state() -> None:
    core = two_steps()
    core.set_task(TaskState.COMPENSATED)
    for check in (retry_problem, park_problem, complete_problem, compensate_problem):
        assert check(core, by("a")) == "the task is already Compensated"


# ---------------------------------------------------------------------- the step a request acts on


def test_the_step_named_is_taken_only_if_it_waits_and_says_which_one_does() -> None:
    core = two_steps()
    core.start("a")
    core.done("a")
    assert retry_problem(core, by("a")) == "step a is Processed, not waiting for a decision"
    failed(core, "b")
    assert retry_problem(core, by("a")) == "step a is Processed; the step waiting for a decision is b"
    assert retry_problem(core, by("b")) is None
    assert retry_problem(core, by()) is None
    assert target_step(core, None).name == "b"
    assert target_step(core, "b").name == "b"


def test_of_two_waiting_steps_each_is_named_in_order() -> None:
    core = core_of(PlanStep("a", 0, 0), PlanStep("b", 1, 0), PlanStep("c", 2, 0))
    failed(core, "a")
    failed(core, "b")
    core.start("c")
    assert park_problem(core, by()) == "steps a, b wait for a decision: name one (--step)"
    assert park_problem(core, by("c")) == "step c is Processing; the step waiting for a decision is a, b"
    assert target_step(core, "a").name == "a"
    with pytest.raises(AssertionError, match="steps a, b wait for a decision: name one"):
        target_step(core, None)


def test_target_step_once_undoing_skips_a_forward_step_left_failed() -> None:
    core = two_steps()
    failed(core, "a")
    core.start("b")
    core.record_failure("b", StepState.COMPENSATION_FAILED, "down", "RemoteTransient", False)
    assert target_step(core, "a").name == "a"
    assert target_step(core, "b", undo=True).name == "b"
    assert target_step(core, None, undo=True).name == "b"
    with pytest.raises(AssertionError, match="step a is Failed; the step waiting for a decision is b"):
        target_step(core, "a", undo=True)


# ----------------------------------------------------------------------------------- FailureCount


@pytest.mark.parametrize("check", [retry_problem, park_problem])
def test_a_decision_at_the_steps_own_count_is_stale_and_one_above_applies(check) -> None:  # type: ignore[no-untyped-def]
    core = two_steps()
    failed(core, "a", count=2)
    assert check(core, by("a", 2)) == "the decision at FailureCount 2 was already applied"
    assert check(core, by("a", 1)) == "the decision at FailureCount 1 was already applied"
    assert check(core, by("a", 3)) is None
    assert check(core, by("a")) is None  # an operator's request names no count


def test_a_second_decision_for_a_step_is_refused_while_the_first_is_queued() -> None:
    core = two_steps()
    failed(core, "a", count=1)
    core.queue("a", "retry", by("a", 2))
    assert retry_problem(core, by("a", 3)) == "a decision for a is already being applied"
    assert complete_problem(core, by("a")) == "a decision for a is already being applied"


def test_a_retry_while_undoing_names_an_undo_and_may_name_a_failed_step_as_runs_from_before_did() -> None:
    core = two_steps()
    failed(core, "a")
    core.begin_compensation(by(reason="asked"))
    assert retry_problem(core, by()) == "no step is waiting for a decision (the task is Failed)"
    assert retry_problem(core, by("a"), forward_while_undoing=True) is None
    assert retry_problem(core, by(), forward_while_undoing=True) is None


# ------------------------------------------------------------------------------------- compensate


def test_a_compensate_before_acceptance_applies_unless_undoing_began() -> None:
    core = two_steps()
    core.accepted = False
    assert compensate_problem(core, by()) is None
    core.begin_compensation(by(reason="cancelled"))
    assert compensate_problem(core, by()) == "the task is already compensating"


def test_a_compensate_while_undoing_retries_the_undo_waiting_and_nothing_else() -> None:
    core = core_of(PlanStep("a", 0, 0), PlanStep("b", 1, 0))
    core.start("a")
    core.done("a")
    core.begin_compensation(by(reason="asked"))
    assert compensate_problem(core, by("a", 4)) == (
        "the task is already compensating; the decision at FailureCount 4 was made before and applies no more"
    )
    assert compensate_problem(core, by()) == "the task is compensating"
    assert compensate_problem(core, by("z")) == "unknown step 'z'; the steps are a, b"
    core.start("a", StepState.COMPENSATING)
    core.record_failure("a", StepState.COMPENSATION_FAILED, "down", "RemoteTransient", False)
    core.start("b", StepState.COMPENSATING)
    core.record_failure("b", StepState.COMPENSATION_FAILED, "down", "RemoteTransient", False)
    assert compensate_problem(core, by()) == "steps a, b wait for a decision: name one (--step)"
    assert compensate_problem(core, by("b")) is None
    core.queue("b", "compensate", by("b"))
    assert compensate_problem(core, by("b")) == "a decision for b is already being applied"
    assert compensate_problem(core, by("a")) is None


def test_a_supervisor_compensate_compares_with_the_named_steps_count_or_the_tasks_highest() -> None:
    core = two_steps()
    failed(core, "a", count=3)
    core.start("b")
    core.step("b").failure_count = 1
    stale = "the decision at FailureCount {} was already applied"
    assert compensate_problem(core, by("a", 3)) == stale.format(3)
    assert compensate_problem(core, by("a", 4)) is None
    assert compensate_problem(core, by("b", 1)) == stale.format(1)
    assert compensate_problem(core, by("b", 2)) is None  # b's own count, not a's
    assert compensate_problem(core, by(None, 3)) == stale.format(3)  # the task's: its highest
    assert compensate_problem(core, by(None, 4)) is None


def test_past_the_pivot_each_reason_a_compensate_is_refused() -> None:
    core = core_of(PlanStep("a", 0, 0, pivot="pivot"), PlanStep("b", 1, 1, pivot="forward_only"))
    core.start("a")
    core.done("a")
    past = "past the point of no return: the pivot a has been attempted (Processed)"
    assert compensate_problem(core, by()) == (
        f"{past}; the task only goes forward (retry it, or leave it parked);"
        " to undo it anyway: sas compensate --force --reason WHY"
    )
    assert compensate_problem(core, by(None, 5, force=True, reason="ladder")) == (
        f"{past}; a Supervisor decision never forces an undo"
    )
    assert compensate_problem(core, by(force=True, reason="  ")) == f"{past}; a forced compensate needs a reason"
    assert compensate_problem(core, by(force=True, reason="agreed with the customer")) is None


# --------------------------------------------------------------------------------- complete by hand


def test_complete_by_hand_refuses_a_wait_an_undo_and_past_the_pivot_unforced() -> None:
    core = core_of(
        PlanStep("w", 0, 0, wait=True, signal="approve"),
        PlanStep("a", 1, 1, pivot="pivot"),
        PlanStep("p", 2, 2, pivot="forward_only"),
    )
    core.start("w", StepState.WAITING)
    core.record_failure("w", StepState.FAILED, "late", "Deadline", True)
    assert complete_problem(core, by("w")) == "step w is a wait: approve or reject it"
    core.set("w", StepState.PROCESSED)
    failed(core, "a")
    assert complete_problem(core, by("a")) is None, "the pivot refused for good did nothing"
    core.set("a", StepState.PROCESSED)
    failed(core, "p")
    assert complete_problem(core, by("p")) == (
        "past the point of no return: step p, after the pivot a, has run;"
        " to complete p by hand anyway: --force --reason WHY"
    )
    assert complete_problem(core, by("p", force=True, reason="done at the desk")) is None
    core.begin_compensation(by(reason="asked"))
    assert complete_problem(core, by("p")) == (
        "the task is compensating: a step is completed by hand only while the task goes forward"
    )


# ----------------------------------------------------------------------------------------- approval


def approvable() -> TaskCore:
    core = core_of(
        PlanStep("w", 0, 0, wait=True, signal="approve"),
        PlanStep("v", 1, 0, wait=True, signal="sign_off"),
        PlanStep("c", 2, 0),
    )
    core.start("w", StepState.WAITING)
    core.start("v", StepState.WAITING)
    core.start("c")
    return core


def test_an_approval_applies_to_the_step_waiting_for_that_very_signal() -> None:
    core = approvable()
    assert approval_problem(core, Approval(), "approve") is None
    assert approval_problem(core, Approval(step="w"), "approve") is None
    assert approval_problem(core, Approval(step="v"), "sign_off") is None
    assert approval_problem(core, Approval(step="v"), "approve") == (
        "step v is Waiting; the step waiting for 'approve' is w"
    )
    assert approval_problem(core, Approval(step="c"), "other") == "step c is Processing, not waiting for 'other'"
    assert approval_problem(core, Approval(), "other") == "no step is waiting for 'other' (the task is Processing)"
    assert approval_problem(core, Approval(step="z"), "approve") == "unknown step 'z'; the steps are w, v, c"


def test_an_approval_is_refused_before_acceptance_after_the_end_and_while_undoing() -> None:
    core = approvable()
    core.accepted = False
    assert approval_problem(core, Approval(), "approve") == "the task has not been accepted yet"
    core.accepted = True
    core.begin_compensation(by(reason="asked"))
    assert approval_problem(core, Approval(step="w"), "approve") == "the task is compensating"
    core.set_task(TaskState.COMPENSATED)
    assert approval_problem(core, Approval(step="w"), "approve") == "the task is already Compensated"


def test_two_steps_waiting_for_one_signal_need_a_name() -> None:
    core = core_of(PlanStep("w", 0, 0, wait=True, signal="approve"), PlanStep("v", 1, 0, wait=True, signal="approve"))
    core.start("w", StepState.WAITING)
    core.start("v", StepState.WAITING)
    assert approval_problem(core, Approval(), "approve") == "steps w, v wait for 'approve': name one (--step)"
    assert approval_problem(core, Approval(step="v"), "approve") is None
