"""What ``run_task`` does in the Supervisor's place: each failed step of a task in the
time-skipping environment gets the decision the Supervisor's default ladder would send, as the
signal it would send, until the task ends or is parked for an operator."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from sas.task_models import OperatorRequest, StepState, StepStatus, TaskResult, TaskState, TaskStatus
from sas.task_models.ids import cleanup_workflow_id
from sas.task_types.steps import ChildTask
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.core.children import child_task_id

_WAITING_FOR_A_DECISION = (StepState.FAILED, StepState.COMPENSATION_FAILED)
# A child step whose completed child is being undone by its clean-up.
_BEING_UNDONE = (StepState.COMPENSATING, StepState.COMPENSATION_FAILED)

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


@dataclass
class LadderDecisions:
    """The decisions sent so far, so that each failure (a task's step, its state and FailureCount)
    is decided once, and each undo's retries are counted, as the Supervisor keeps them."""

    decided: set[tuple[str, str, StepState, int]] = field(default_factory=set)
    undo_tries: dict[str, dict[str, int]] = field(default_factory=dict)

    async def decide(
        self, task: WorkflowHandle[Any, Any], definition: TaskDefinition, status: TaskStatus, step: StepStatus
    ) -> bool:
        """Send ``step`` the ladder's decision if it waits for one not yet sent; whether it did."""
        failure = (status.task_id, step.name, step.state, step.failure_count)
        if step.state not in _WAITING_FOR_A_DECISION or failure in self.decided:
            return False
        self.decided.add(failure)
        tries = self.undo_tries.setdefault(status.task_id, {})
        await task.signal(*ladder_decision(step, tries, past_pivot=past_pivot(definition, status)))
        return True


def _parked(status: TaskStatus) -> TaskResult:
    """A task parked for an operator has no result yet: its state so far."""
    return TaskResult(task_id=status.task_id, state=status.state, steps=status.steps)


async def supervised(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[Any, TaskResult],
    definition: TaskDefinition,
    children: Mapping[str, TaskDefinition] | None = None,
) -> TaskResult:
    """The task's result, deciding for each failed step as the Supervisor's default ladder would,
    of the task and of its child tasks (``children``: each child step's task type -> its
    definition), as the Supervisor decides for every task.

    The task is watched through its status query, not its result: a client waiting on a result
    lets the test server skip time, past the moment a decision was due. A step that waits for a
    time, or for an answer nobody gives here, has its time skipped to its deadline."""
    ladder = LadderDecisions()
    while True:
        status = await handle.query("status", result_type=TaskStatus)
        if status.state.terminal or status.needs_operator:
            return await handle.result() if status.state.terminal else _parked(status)
        undecided = False
        deadlines: list[datetime] = []
        for task, its_definition, its_status in await task_and_children(
            env, handle, definition, status, children or {}
        ):
            for step in its_status.steps:
                if step.state == StepState.WAITING and step.wait_until is not None:
                    deadlines.append(step.wait_until)
                undecided = await ladder.decide(task, its_definition, its_status, step) or undecided
        if deadlines and not undecided:
            await env.sleep(max(min(deadlines) - await env.get_current_time(), timedelta(seconds=1)))
        else:
            await asyncio.sleep(0.1)


async def task_and_children(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[Any, Any],
    definition: TaskDefinition,
    status: TaskStatus,
    children: Mapping[str, TaskDefinition],
) -> list[tuple[WorkflowHandle[Any, Any], TaskDefinition, TaskStatus]]:
    """The task with its status, then each running child task of its child steps (and theirs),
    and the clean-up of a completed one while its parent undoes it."""
    found = [(handle, definition, status)]
    for item in definition.steps:
        if not isinstance(item, ChildTask) or item.task_type not in children:
            continue
        step = next((s for s in status.steps if s.name == item.name), None)
        for incarnation in range(1, (step.runs if step is not None else 0) + 1):
            child = env.client.get_workflow_handle(child_task_id(status.task_id, item.name, incarnation))
            try:
                child_status = await child.query("status", result_type=TaskStatus)
            except RPCError:
                continue  # not started yet, or gone
            if not child_status.state.terminal:
                found += await task_and_children(env, child, children[item.task_type], child_status, children)
            elif child_status.state == TaskState.PROCESSED and step is not None and step.state in _BEING_UNDONE:
                # A completed child its parent undoes: its clean-up's undos are decided alike.
                found += await _running_cleanup(env, child.id, children[item.task_type])
    return found


async def _running_cleanup(
    env: WorkflowEnvironment, task_id: str, definition: TaskDefinition
) -> list[tuple[WorkflowHandle[Any, Any], TaskDefinition, TaskStatus]]:
    cleanup = env.client.get_workflow_handle(cleanup_workflow_id(task_id))
    try:
        status = await cleanup.query("status", result_type=TaskStatus)
    except RPCError:
        return []  # not started, or gone
    return [] if status.state.terminal else [(cleanup, definition, status)]
