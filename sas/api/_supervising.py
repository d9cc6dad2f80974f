"""What ``run_task`` does in the Supervisor's place: each failed step of a task in the
time-skipping environment gets the decision the Supervisor's default ladder would send, as the
signal it would send, until the task ends or is parked for an operator."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sas.task_models import OperatorRequest, StepState, StepStatus, TaskResult, TaskStatus
from sas.task_types.definitions import TaskDefinition

_WAITING_FOR_A_DECISION = (StepState.FAILED, StepState.COMPENSATION_FAILED)

# The Supervisor's default ladder: a transient failure retried three times; an undo that fails
# retried twice, then parked for an operator.
_RETRIES = 3
_UNDO_RETRIES = 2


def ladder_decision(
    step: StepStatus, undo_tries: dict[str, int], *, past_pivot: bool = False
) -> tuple[str, OperatorRequest]:
    """The signal the Supervisor's default ladder sends for a step waiting for a decision;
    ``undo_tries`` counts the retries of each step's undo so far. ``past_pivot``: the task is past
    its point of no return, where the ladder's end is ``park``, never ``compensate``."""
    if step.state == StepState.COMPENSATION_FAILED:
        tries = undo_tries[step.name] = undo_tries.get(step.name, 0) + 1
        kind = "retry" if tries <= _UNDO_RETRIES else "park"
    else:
        kind = "retry" if not step.permanent and step.failure_count < _RETRIES else "compensate"
        kind = "park" if kind == "compensate" and past_pivot else kind
    # As the Supervisor does: each decision counts one more failure (FailureCount).
    return kind, OperatorRequest(step=step.name, failure_count=step.failure_count + 1, by="supervisor")


def past_pivot(definition: TaskDefinition, status: TaskStatus) -> bool:
    """Whether the task is past its point of no return, as its Scheduler reads it: a step after
    the pivot has run, or the pivot was attempted with an outcome other than a refusal for good."""
    if definition.pivot is None:
        return False
    for step in status.steps:
        role = definition.pivot_role(step.name)
        if role == "forward_only" and step.runs > 0:
            return True
        if role == "pivot" and step.runs > 0 and not (step.permanent and step.state in _WAITING_FOR_A_DECISION):
            return True
    return False


def _parked(status: TaskStatus) -> TaskResult:
    """A task parked for an operator has no result yet: its state so far."""
    return TaskResult(task_id=status.task_id, state=status.state, steps=status.steps)


async def supervised(
    env: WorkflowEnvironment, handle: WorkflowHandle[Any, TaskResult], definition: TaskDefinition
) -> TaskResult:
    """The task's result, deciding for each failed step as the Supervisor's default ladder would.

    The task is watched through its status query, not its result: a client waiting on a result
    lets the test server skip time, past the moment a decision was due. A step that waits for a
    time, or for an answer nobody gives here, has its time skipped to its deadline."""
    decided: set[tuple[str, StepState, int]] = set()
    undo_tries: dict[str, int] = {}
    while True:
        status = await handle.query("status", result_type=TaskStatus)
        if status.state.terminal or status.needs_operator:
            return await handle.result() if status.state.terminal else _parked(status)
        undecided = False
        for step in status.steps:
            failure = (step.name, step.state, step.failure_count)
            if step.state not in _WAITING_FOR_A_DECISION or failure in decided:
                continue
            undecided = True
            decided.add(failure)
            await handle.signal(*ladder_decision(step, undo_tries, past_pivot=past_pivot(definition, status)))
        deadlines = [s.wait_until for s in status.steps if s.state == StepState.WAITING and s.wait_until is not None]
        if deadlines and not undecided:
            await env.sleep(max(min(deadlines) - await env.get_current_time(), timedelta(seconds=1)))
        else:
            await asyncio.sleep(0.1)
