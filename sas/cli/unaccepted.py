"""A task whose workflow ended before sas accepted it: what ``sas status`` and ``sas show`` say.

A run started without ``sas submit`` (plain ``temporal workflow start``, a team's own client)
with input its task type refuses fails at once, non-retryably, before its first write: the
state store never hears of it. Its story is then Temporal's alone, and these commands tell it
as that: the run failed, and why, rather than "Pending" from a query or "no such task".
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from sas.cli.output import console, shown, styled

_ENDED_BEFORE = {"FAILED": "Failed", "TERMINATED": "Terminated", "CANCELED": "Cancelled", "TIMED_OUT": "TimedOut"}


async def closed_before_accepted(client: Client, task_id: str) -> dict[str, Any] | None:
    """The newest run of ``task_id`` if it ended without completing (the caller knows the state
    store has no such task), with the reason Temporal recorded; None otherwise."""
    handle = client.get_workflow_handle(task_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = described.status.name if described.status is not None else ""
    if status not in _ENDED_BEFORE:
        return None
    reason, error_type = "", None
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        cause = err.cause
        reason = " ".join(str(getattr(cause, "message", None) or cause or err).split())
        error_type = getattr(cause, "type", None)
    return {
        "source": "temporal",
        "task_id": task_id,
        "task_type": None,
        "workflow_type": described.workflow_type,
        "run_id": described.run_id,
        "state": _ENDED_BEFORE[status],
        "accepted": False,
        "error_type": error_type,
        "reason": reason,
        "current_step": None,
        "needs_operator": False,
        "steps": [],
    }


def report(data: dict[str, Any]) -> None:
    """One task that never reached the state store, in two lines."""
    what = f"{data['error_type']}: " if data.get("error_type") else ""
    console.print(
        f"[bold]{shown(data['task_id'])}[/bold] ({shown(data['workflow_type'])}): {styled(data['state'])} before sas "
        f"accepted it, so nothing was done: {shown(what + data['reason'])}"
    )
    console.print("fix what it says and start it again under a new id (`sas submit --type TYPE --input FILE`)")
