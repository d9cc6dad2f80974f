"""A delayed task before it runs (``TaskClient.cancel``, ``TaskClient.reschedule``), and
cancelling a schedule.

A task submitted with a start delay is a workflow with a start delay: Temporal holds it, with
nothing run and no rows in the state store, until the delay ends. Temporal cannot change a
start delay, so

- cancel = terminate that run: nothing had started, so there is nothing to undo;
- reschedule = terminate it and start the same task (type, input, queue, priority) under the
  same id with the new delay (``sas.client.submitting.start_task``, as every start). The reuse
  policy allows a new run only after a terminated or failed one, so a task that has meanwhile
  finished is never started again.

Both act only while Temporal shows the run not started (its history is the start event
alone) and not about to start (``MIN_LEAD``): a task that has begun is undone with
compensate, never terminated half way. Cancelling a schedule's id deletes the schedule (runs
already started go on). Each action is audited, written before it is taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import Priority
from temporalio.service import RPCError, RPCStatusCode

from sas.client import audit
from sas.client.answering import describe
from sas.client.errors import NotApplicable, TaskIdTaken, TaskNotFound
from sas.client.store import StateStore
from sas.client.submitting import priority_of, run_again, start_task
from sas.workflows.registry import by_workflow_name

# Closer to its start than this, a delayed task may begin before the termination lands.
MIN_LEAD = timedelta(seconds=5)


@dataclass(frozen=True)
class Pending:
    """A delayed task that has not started: the run to act on and what it was started with."""

    task_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    payload: dict[str, Any]
    starts_at: datetime
    priority: Priority = Priority.default


async def pending(client: Client, task_id: str) -> Pending | None:
    """The task's run if it is delayed and not started yet; None if Temporal has no such workflow.

    Raises NotApplicable naming the task's state when it exists but has started or finished."""
    described = await describe(client, task_id)
    if described is None:
        return None
    if described.status != WorkflowExecutionStatus.RUNNING:
        status = described.status.name.lower() if described.status else "closed"
        raise NotApplicable(f"{task_id} has already ended ({status}): nothing to cancel", f"see `sas show {task_id}`")
    starts_at = described.execution_time
    if described.history_length > 1 or starts_at is None or starts_at <= datetime.now(UTC):
        raise NotApplicable(
            f"{task_id} has started: only a delayed task that has not run can be cancelled or rescheduled",
            f"undo it with `sas compensate {task_id} --reason …`",
        )
    if starts_at - datetime.now(UTC) < MIN_LEAD:
        raise NotApplicable(
            f"{task_id} starts in under {MIN_LEAD.seconds}s: too late to cancel or reschedule safely",
            f"once it runs, undo it with `sas compensate {task_id} --reason …`",
        )
    started = None
    async for event in client.get_workflow_handle(task_id, run_id=described.run_id).fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        break
    if started is None:
        raise NotApplicable(f"{task_id}: Temporal returned no start event", f"see `sas status {task_id}`")
    decoded = await client.data_converter.decode(started.input.payloads) if started.input.payloads else []
    payload = decoded[0] if decoded and isinstance(decoded[0], dict) else {}
    return Pending(
        task_id=task_id,
        run_id=described.run_id,
        workflow_type=described.workflow_type,
        task_queue=described.task_queue,
        payload=payload,
        starts_at=starts_at,
        priority=priority_of(described.raw_description.workflow_execution_info.priority),
    )


async def _terminate(client: Client, task: Pending, why: str) -> None:
    # Pinned to the run we looked at: a newer run of the id is never the one terminated.
    await client.get_workflow_handle(task.task_id, run_id=task.run_id).terminate(reason=why)


async def cancel(client: Client, store: StateStore, task_id: str, by: str, reason: str) -> dict[str, Any]:
    """Cancel a delayed task before it starts, or delete the schedule of that id; what was done."""
    task = await pending(client, task_id)
    if task is None:
        return await _cancel_schedule(client, store, task_id, by, reason)
    changed = f"delayed start at {_when(task.starts_at)} cancelled; nothing had run"
    async with audit.audited(store, task_id, "cancel", by, reason) as entry:
        await _terminate(client, task, f"cancelled by {by}" + (f": {reason}" if reason else ""))
        entry.changed = changed
    return {"task_id": task_id, "cancelled": "task", "run_id": task.run_id, "changed": changed}


async def _cancel_schedule(client: Client, store: StateStore, schedule_id: str, by: str, reason: str) -> dict[str, Any]:
    handle = client.get_schedule_handle(schedule_id)
    try:
        await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFound(
                f"no delayed task or schedule {schedule_id!r}", "see `sas list` and `sas schedule list`"
            ) from None
        raise
    changed = "schedule deleted: no more runs (runs already started go on)"
    async with audit.audited(store, schedule_id, "cancel", by, reason) as entry:
        await handle.delete()
        entry.changed = changed
    return {"task_id": schedule_id, "cancelled": "schedule", "changed": changed}


async def reschedule(
    client: Client, store: StateStore, task_id: str, delay: timedelta, by: str, reason: str
) -> dict[str, Any]:
    """Move a delayed task's start to ``delay`` from now; what was done."""
    task = await pending(client, task_id)
    if task is None:
        raise TaskNotFound(f"no delayed task {task_id!r}", "check the id with `sas list`")
    if by_workflow_name(task.workflow_type) is None:
        raise NotApplicable(f"{task_id} is a {task.workflow_type}, which sas does not start: not rescheduled")
    new_start = datetime.now(UTC) + delay
    changed = f"start moved from {_when(task.starts_at)} to {_when(new_start)}"
    async with audit.audited(store, task_id, "reschedule", by, reason) as entry:
        await _terminate(client, task, f"rescheduled by {by} to {_when(new_start)}")
        # The same task (type, input, queue, priority) under the same id, only later; the UI
        # says the new start (the old run's summary said the old one).
        handle = await start_task(
            client, run_again(task, priority=task.priority, start_delay=delay, reuse="after_terminated")
        )
        if handle is None:
            raise TaskIdTaken(
                f"{task_id}: its delayed start was cancelled, but another run of the id started meanwhile",
                f"see `sas status {task_id}`",
            )
        entry.changed = changed
    return {
        "task_id": task_id,
        "run_id": handle.result_run_id,
        "scheduled_for": new_start.isoformat(),
        "was": task.starts_at.isoformat(),
        "changed": changed,
    }


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
