"""A task started with a start delay (``sas submit --in/--at``) before it runs.

Until its delay ends, Temporal has the workflow but no workflow task: the Scheduler cannot
answer its ``status`` query and the state store has no row yet. ``sas status`` and
``sas show`` ask Temporal when it will start instead of saying "no task".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from sas.cli.output import console, print_json, shown


async def scheduled(client: Client, task_id: str) -> dict[str, Any] | None:
    """When a task that has not run yet starts (a delayed start), or that it was cancelled before it
    ran (`sas cancel`); None if Temporal has no such task, or it has run."""
    try:
        described = await client.get_workflow_handle(task_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status == WorkflowExecutionStatus.TERMINATED and _never_ran(described):
        # `sas cancel` ends a delayed task by terminating it before its first workflow task.
        history = await client.get_workflow_handle(task_id, run_id=described.run_id).fetch_history()
        ended = history.events[-1].workflow_execution_terminated_event_attributes
        return {
            "task_id": task_id,
            "task_type": described.workflow_type,
            "state": "Cancelled",
            "cancelled_at": described.close_time.isoformat() if described.close_time else None,
            "reason": ended.reason,
        }
    if described.status != WorkflowExecutionStatus.RUNNING or described.execution_time is None:
        return None
    return {
        "task_id": task_id,
        "task_type": described.workflow_type,
        "state": "Scheduled",
        "scheduled_for": described.execution_time.isoformat(),
        "due": described.execution_time <= datetime.now(UTC),
    }


def _never_ran(described: Any) -> bool:
    # Started, then terminated: no workflow task ever ran, so the task never started.
    return int(described.raw_description.workflow_execution_info.history_length) <= 2


def report(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    if data["state"] == "Cancelled":
        at = data["cancelled_at"] or "?"
        console.print(f"{shown(data['task_id'])}: cancelled before it started, at {at} ({shown(data['reason'])})")
        return
    when = datetime.fromisoformat(data["scheduled_for"]).strftime("%Y-%m-%d %H:%M:%S %Z")
    if data["due"]:
        console.print(f"{shown(data['task_id'])}: due since {when}, waiting for a worker to pick it up")
    else:
        console.print(f"{shown(data['task_id'])}: scheduled for {when}; nothing has run yet")
