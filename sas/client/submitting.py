"""Starting a task the one right way, and starting a finished one again as its next incarnation.

A task id is one task, forever: a start never reuses an id (``REJECT_DUPLICATE``, ``FAIL`` on
conflict), and a refused start says which task the id names and what to do instead. A
resubmission is the one exception, and it is the accepting run that allows it (``mirror.accept``)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import Priority, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from sas.client.answering import run_status
from sas.client.errors import NotApplicable, NotConfirmed, TaskIdTaken, TaskNotFound
from sas.client.inputs import TASK_TYPES
from sas.client.store import StateStore
from sas.task_models import TaskState
from sas.task_models.ids import MAX_INCARNATION
from sas.workflows.registry import by_workflow_name
from sas.workflows.summaries import delayed_start, task_details, task_summary


async def start(
    client: Client,
    task_queue: str,
    task_type: str,
    task_id: str,
    payload: dict[str, Any],
    start_delay: timedelta | None = None,
    priority: Priority = Priority.default,
) -> bool:
    """Start the task's workflow (id = task id) on ``task_queue``. False if the id already names
    a task (running or finished): nothing new started. ``priority`` is Temporal's task priority:
    a backlogged queue hands out urgent tasks first."""
    definition, workflow_name = TASK_TYPES[task_type]
    summary, details = task_summary(definition, task_id, payload), task_details(definition, task_id, payload)
    if start_delay:
        # Until it starts, these are all the UI can show of it: say when.
        summary, details = delayed_start(task_id, summary, details, datetime.now(UTC) + start_delay)
    try:
        await client.start_workflow(
            workflow_name,
            payload,
            id=task_id,
            task_queue=task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=start_delay,
            priority=priority,
            # What the UI's list and workflow page show before the Scheduler has said anything.
            static_summary=summary,
            static_details=details,
        )
        return True
    except WorkflowAlreadyStartedError:
        return False


async def existing_task(client: Client, store: StateStore, task_id: str) -> TaskIdTaken:
    """Why ``task_id`` cannot be submitted again: the task it already names, its state, what to do.

    The state comes from the mirror row when there is one (the newest Temporal run may be a
    refused reuse of the id, which says nothing about the task), else from Temporal."""
    from sas.runtime.failures import StateStoreUnreachable
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task

    temporal = await run_status(client, task_id)
    try:
        record = await store.read(lambda s: get_task(s, task_id))
        mirrored = record.task.state if record is not None else None
    except StateStoreUnreachable:
        mirrored = None  # the refusal still stands; Temporal's word is enough to explain it
    if temporal == "RUNNING":
        return TaskIdTaken(
            f"task {task_id} is already running" + (f" ({mirrored})" if mirrored else "") + ": a task id is one task",
            f"follow it with `sas status {task_id} --follow`, or submit under a new id",
            state=mirrored or "Running",
        )
    state = mirrored or (f"{temporal.lower()} in Temporal" if temporal else "unknown")
    how = (
        f"`sas resubmit {task_id} --reason …` runs it again as a new incarnation, or submit under a new id"
        if state in RESUBMITTABLE
        else "submit it under a new id"
    )
    return TaskIdTaken(f"task {task_id} already exists and is {state}: a task id is one task", how, state=state)


async def resubmit_finished(
    client: Client, store: StateStore, task_id: str, by: str, reason: str, timeout_s: float = 60
) -> int:
    """Run a finished Compensated or Error task again as its next incarnation; the new incarnation's number.

    The new run of the same workflow id carries the operator's request in its memo; its
    ``mirror.accept`` archives the finished rows, starts fresh ones under new idempotency keys
    and audits the resubmission, or refuses it if the task changed since we looked
    (another resubmission, a Processed task). We wait for that answer so the caller knows."""
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task
    from sas.task_models import RESUBMIT_MEMO, Resubmission

    record = await store.read(lambda s: get_task(s, task_id))
    if record is None:
        raise TaskNotFound(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    task = record.task
    if task.state == TaskState.PROCESSED:
        raise NotApplicable(f"{task_id} is Processed: it is done and stays done", "submit a new task under a new id")
    if task.state not in RESUBMITTABLE:
        # Another operator's resubmission got there first, or the mirror is behind Temporal.
        if await run_status(client, task_id) == "RUNNING":
            raise NotApplicable(
                f"{task_id} is running again (incarnation {task.incarnation}, {task.state}): nothing to resubmit",
                f"follow it with `sas status {task_id} --follow`",
            )
        raise NotApplicable(
            f"{task_id} is {task.state} in the state store but its workflow is not running: not resubmitted",
            f"the state store is behind Temporal; see `sas show {task_id}` and `sas status {task_id}`",
        )
    if task.chain_id is None:
        raise NotApplicable(
            f"{task_id} has no recorded run chain: it cannot be resubmitted", f"see `sas show {task_id}`"
        )
    if task.incarnation >= MAX_INCARNATION:
        # The incarnation is part of every idempotency key, whose length is bounded (sas/task_models/ids.py).
        raise NotApplicable(
            f"{task_id} has been run {task.incarnation} times, the most a task id can be: not resubmitted",
            "submit it under a new id",
        )
    request = Resubmission(of=task.chain_id, by=by, reason=reason)
    summary, details = resubmission_metadata(task.workflow_type, task_id, task.payload, task.incarnation + 1, by)
    try:
        handle = await client.start_workflow(
            task.workflow_type,
            task.payload,
            id=task_id,
            task_queue=task.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            memo={RESUBMIT_MEMO: request.model_dump()},
            static_summary=summary,
            static_details=details,
        )
    except WorkflowAlreadyStartedError:
        raise await existing_task(client, store, task_id) from None
    new_chain = handle.first_execution_run_id or handle.result_run_id

    async def answer() -> int | NotApplicable | None:
        now = await store.read(lambda s: get_task(s, task_id))
        if now is not None and now.task.chain_id == new_chain:
            return now.task.incarnation
        # This run's own status: a later run of the id (another operator's) says nothing about it.
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            return await _refused(handle, task_id)
        return None

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (outcome := await answer()) is None:
        if loop.time() > deadline:
            raise NotConfirmed(
                f"{task_id}: resubmitted, but no worker has accepted the new run within {timeout_s:.0f}s",
                f"it starts when a worker polls {task.task_queue}; follow it with `sas status {task_id} --follow`",
            )
        await asyncio.sleep(0.5)
    if isinstance(outcome, NotApplicable):
        raise outcome
    return outcome


def resubmission_metadata(
    workflow_type: str, task_id: str, payload: dict[str, Any], incarnation: int, by: str
) -> tuple[str | None, str | None]:
    """The UI's summary and details of a resubmitted run: the task's own, saying which
    incarnation it is and who started it (the reason stays in the audit log)."""
    registered = by_workflow_name(workflow_type)
    if registered is None:
        return None, None
    definition = registered.definition
    summary = f"{task_summary(definition, task_id, payload)} · incarnation {incarnation}"
    details = (
        f"{task_details(definition, task_id, payload)}\n\n"
        f"**Incarnation {incarnation}**, resubmitted by {by} with `sas resubmit`;"
        f" `sas show {task_id}` lists the earlier ones."
    )
    return summary, details


async def _refused(handle: WorkflowHandle[Any, Any], task_id: str) -> NotApplicable:
    """Why the resubmitted run ended before it was accepted, as the accept worded it (TaskIdReused)."""
    from temporalio.client import WorkflowFailureError

    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        reason = getattr(err.cause, "message", None) or str(err.cause)
        return NotApplicable(f"{task_id}: resubmission refused: {reason}", f"see `sas show {task_id}`")
    return NotApplicable(f"{task_id}: the new run ended before it was accepted", f"see `sas show {task_id}`")
