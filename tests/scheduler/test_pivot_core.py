"""The pure core's point of no return (``TaskCore.past_pivot``) and the compensate requests it
refuses (``workflows/core/requests.py``): plain Python, no Temporal."""

from __future__ import annotations

from sas.task_models import OperatorRequest, StepState, StepStatus, TaskState, TaskStatus
from sas.workflows.core.machine import PlanStep, TaskCore
from sas.workflows.core.requests import compensate_problem


def core(pivot: bool = True) -> TaskCore:
    plan = [
        PlanStep("book", 0, 0),
        PlanStep("charge", 1, 1, pivot="pivot" if pivot else None),
        PlanStep("issue", 2, 2, undo=False, pivot="forward_only" if pivot else None),
    ]
    status = TaskStatus(
        task_id="t",
        task_type="x",
        state=TaskState.PROCESSING,
        steps=[StepStatus(name=p.name, position=p.position) for p in plan],
    )
    made = TaskCore(status, plan, accepted=True)
    made.start("book")
    made.done("book")
    return made


def test_before_the_pivot_is_attempted_the_task_may_be_undone() -> None:
    c = core()
    assert c.past_pivot() is None and compensate_problem(c, OperatorRequest()) is None


def test_the_pivot_refused_for_good_may_still_be_undone() -> None:
    c = core()
    c.start("charge")
    c.record_failure("charge", StepState.FAILED, "card declined", "Refused", True)
    assert c.past_pivot() is None and compensate_problem(c, OperatorRequest()) is None
    c.set("charge", StepState.ERROR, TaskState.ERROR)  # parked by the ladder: the refusal still stands
    assert c.past_pivot() is None


def test_the_pivot_attempted_with_an_outcome_that_may_be_its_effect_is_past() -> None:
    for outcome in ("running", "transient", "done"):
        c = core()
        c.start("charge")
        if outcome == "transient":
            c.record_failure("charge", StepState.FAILED, "timed out", "Timeout", False)
        elif outcome == "done":
            c.done("charge")
        assert c.past_pivot() is not None, outcome
        problem = compensate_problem(c, OperatorRequest(by="alice"))
        assert problem is not None and problem.startswith("past the point of no return: the pivot charge")


def test_a_step_after_the_pivot_run_is_past() -> None:
    c = core()
    c.start("charge")
    c.done("charge")
    c.start("issue")
    c.record_failure("issue", StepState.FAILED, "no", "Refused", True)
    assert c.past_pivot() == "step issue, after the pivot charge, has run"


def test_only_an_operator_s_forced_request_with_a_reason_undoes_past_the_pivot() -> None:
    c = core()
    c.start("charge")
    c.done("charge")
    assert "needs a reason" in (compensate_problem(c, OperatorRequest(force=True)) or "")
    supervisor = OperatorRequest(force=True, reason="x", failure_count=9, decision_id="1", by="supervisor")
    assert "never forces" in (compensate_problem(c, supervisor) or "")
    assert compensate_problem(c, OperatorRequest(force=True, by="alice", reason="agreed with the customer")) is None


def test_without_a_pivot_nothing_changes() -> None:
    c = core(pivot=False)
    c.start("charge")
    c.done("charge")
    c.start("issue")
    assert c.past_pivot() is None and compensate_problem(c, OperatorRequest()) is None
