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

from sas_cli.output import console, print_json


async def scheduled(client: Client, task_id: str) -> dict[str, Any] | None:
    """When a task that has not run yet starts (a delayed start), or None if Temporal has no such task."""
    try:
        described = await client.get_workflow_handle(task_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status != WorkflowExecutionStatus.RUNNING or described.execution_time is None:
        return None
    return {
        "task_id": task_id,
        "task_type": described.workflow_type,
        "state": "Scheduled",
        "scheduled_for": described.execution_time.isoformat(),
        "due": described.execution_time <= datetime.now(UTC),
    }


def report(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    when = datetime.fromisoformat(data["scheduled_for"]).strftime("%Y-%m-%d %H:%M:%S %Z")
    if data["due"]:
        console.print(f"{data['task_id']}: due since {when}, waiting for a worker to pick it up")
    else:
        console.print(f"{data['task_id']}: scheduled for {when}; nothing has run yet")
