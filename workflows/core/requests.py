"""Whether an operator's or the Supervisor's request applies to the task now, and why not.

One function per request kind, each returning None (it applies) or the reason it does not.
The updates' validators raise the reason, so the caller is answered at once; the signals
record it in the task's events and change nothing. Both ask the same function, so a signal
is applied exactly when the update would have been accepted.

A request applies only to the exact state it names:
- the step it names must be the one waiting (``step``);
- a Supervisor decision carries the FailureCount it was made at (``failure_count``) and
  applies only while the step's count is below it: a stale or duplicate decision, re-sent by
  an outbox or by hand, is refused (``the decision at FailureCount N was already applied``);
- a decision to compensate made before compensation began never applies once it has begun:
  it would otherwise retry an undo that was parked for an operator;
- a task past its pivot (its point of no return, ``TaskCore.past_pivot``) is not undone: only
  an operator's compensate with ``force`` and a reason undoes it.
"""

from __future__ import annotations

from collections.abc import Callable

from sas.task_models import Approval, OperatorRequest, StepState, StepStatus
from sas.workflows.core.machine import PlanStep, TaskCore


def _common(core: TaskCore, step: str | None) -> str | None:
    if not core.accepted:
        return "the task has not been accepted yet"
    if core.status.state.terminal:
        return f"the task is already {core.status.state}"
    if step is not None and step not in core.names():
        return f"unknown step {step!r}; the steps are {', '.join(core.names())}"
    return None


def _target(core: TaskCore, step: str | None, waiting: list[StepStatus], what: str) -> StepStatus | str:
    """The step a request acts on, or why there is none: the named one if it is waiting, else
    the only one waiting."""
    names = ", ".join(s.name for s in waiting)
    if step is not None:
        found = next((s for s in waiting if s.name == step), None)
        if found is not None:
            return found
        state = core.step(step).state
        if not waiting:
            return f"step {step} is {state}, not waiting for {what}"
        return f"step {step} is {state}; the step waiting for {what} is {names}"
    if not waiting:
        return f"no step is waiting for {what} (the task is {core.status.state})"
    if len(waiting) > 1:
        return f"steps {names} wait for {what}: name one (--step)"
    return waiting[0]


def _stale(request: OperatorRequest, step: StepStatus) -> str | None:
    if request.failure_count is not None and request.failure_count <= step.failure_count:
        return f"the decision at FailureCount {request.failure_count} was already applied"
    return None


def _deciding(core: TaskCore) -> list[StepStatus]:
    """The steps a decision may act on: those waiting for one; once undoing has begun, only the
    undos (a forward step left Failed is undone with the others, and waits for nothing)."""
    waiting = core.waiting()
    return [s for s in waiting if s.state != StepState.FAILED] if core.compensating else waiting


def retry_problem(core: TaskCore, request: OperatorRequest, *, forward_while_undoing: bool = False) -> str | None:
    """Why a retry does not apply now: re-run the step waiting for a decision, or retry its undo.
    ``forward_while_undoing``: the rule of runs from before, when a retry sent while undoing could
    still name a forward step left Failed (and was later taken by its undo)."""
    problem = _common(core, request.step)
    if problem:
        return problem
    waiting = core.waiting() if forward_while_undoing else _deciding(core)
    target = _target(core, request.step, waiting, "a decision")
    if isinstance(target, str):
        return target
    if core.has_request(target.name):
        return f"a decision for {target.name} is already being applied"
    return _stale(request, target)


def compensate_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    """Why a request to undo the task does not apply now. While the task is compensating, an
    operator's compensate retries the undo that waits for a decision; a Supervisor decision
    (it names a FailureCount) made before compensation began applies no more."""
    if not core.accepted:
        return "the task is already compensating" if core.compensating else None
    problem = _common(core, request.step)
    if problem:
        return problem
    if core.compensating:
        if request.failure_count is not None:
            return (
                f"the task is already compensating; the decision at FailureCount {request.failure_count} "
                "was made before and applies no more"
            )
        undo_waiting = _deciding(core)
        if not undo_waiting:
            return "the task is compensating"
        target = _target(core, request.step, undo_waiting, "a decision")
        if isinstance(target, str):
            return target
        if core.has_request(target.name):
            return f"a decision for {target.name} is already being applied"
        return None
    if request.failure_count is not None:
        named = core.step(request.step) if request.step is not None else None
        current = named.failure_count if named is not None else core.task_failure_count()
        if request.failure_count <= current:
            return f"the decision at FailureCount {request.failure_count} was already applied"
    return _pivot_problem(core, request)


def _pivot_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    past = core.past_pivot()
    if past is None:
        return None
    if not request.force:
        return (
            f"past the point of no return: {past}; the task only goes forward (retry it, or leave it parked);"
            " to undo it anyway: sas compensate --force --reason WHY"
        )
    if request.failure_count is not None:
        return f"past the point of no return: {past}; a Supervisor decision never forces an undo"
    if not request.reason.strip():
        return f"past the point of no return: {past}; a forced compensate needs a reason"
    return None


def park_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    """Why parking (the step waits as Error for an operator) does not apply now."""
    problem = _common(core, request.step)
    if problem:
        return problem
    target = _target(core, request.step, core.waiting(), "a decision")
    if isinstance(target, str):
        return target
    return _stale(request, target)


def complete_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    """Why completing a step by hand (an operator made its call some other way) does not apply
    now: only a forward step waiting for a decision, never a wait, never while undoing, and past
    the pivot only when forced with a reason."""
    return _forward_repair_problem(core, request, "completed by hand", "complete {step} by hand")


def retry_with_input_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    """Why retrying a step with a changed input (a bad input fixed) does not apply now: the same
    bounds as completing it by hand, since from then on every call is made with the new input."""
    return _forward_repair_problem(core, request, "retried with a changed input", "retry {step} with a changed input")


def skip_problem(core: TaskCore, request: OperatorRequest) -> str | None:
    """Why skipping a step (the task does without it) does not apply now: the bounds of every
    forward repair, and only a step its task type declares skippable."""
    return _forward_repair_problem(core, request, "skipped", "skip {step}", allowed=_skippable)


def _skippable(step: PlanStep) -> str | None:
    if step.skippable:
        return None
    return f"step {step.name} may not be skipped: its task type does not declare it skippable"


def _forward_repair_problem(
    core: TaskCore,
    request: OperatorRequest,
    done: str,
    to_do: str,
    *,
    allowed: Callable[[PlanStep], str | None] | None = None,
) -> str | None:
    """An operator's repair of a forward step: it waits for a decision, it is no wait, the
    repair is ``allowed`` on it, the task is not being undone, and it is before the pivot unless
    forced with a reason."""
    problem = _common(core, request.step)
    if problem:
        return problem
    if core.compensating:
        return f"the task is compensating: a step is {done} only while the task goes forward"
    target = _target(core, request.step, _deciding(core), "a decision")
    if isinstance(target, str):
        return target
    planned = core.planned(target.name)
    if planned.wait:
        return f"step {target.name} is a wait: approve or reject it"
    refused = allowed(planned) if allowed is not None else None
    if refused:
        return refused
    if core.has_request(target.name):
        return f"a decision for {target.name} is already being applied"
    past = core.past_pivot()
    if past is not None and not request.force:
        return f"past the point of no return: {past}; to {to_do.format(step=target.name)} anyway: --force --reason WHY"
    return None


def approval_problem(core: TaskCore, approval: Approval, waiting_for: str) -> str | None:
    """Why an approval (or a rejection) does not apply: the step it names must be a wait step
    that is waiting now for this very signal."""
    problem = _common(core, approval.step)
    if problem:
        return problem
    if core.compensating:
        return "the task is compensating"
    waiting = [
        s for s in core.status.steps if s.state == StepState.WAITING and core.planned(s.name).signal == waiting_for
    ]
    target = _target(core, approval.step, waiting, f"'{waiting_for}'")
    return target if isinstance(target, str) else None


def target_step(core: TaskCore, step: str | None, *, undo: bool = False) -> StepStatus:
    """The step a request that applies acts on (call after its ``*_problem`` returned None)."""
    waiting = [s for s in core.waiting() if not undo or s.state != StepState.FAILED]
    found = _target(core, step, waiting, "a decision")
    assert not isinstance(found, str), found
    return found
