"""A step result sas did not produce: flagged, never adopted silently.

``temporal activity complete`` (or the same API call from any client of the namespace) ends a
running Agent's activity with a result the caller writes; the Scheduler takes it as the
service's answer. When reconciling finds a step Temporal shows done whose Agent never recorded
it done, it reads the step's activity in the workflow's history: a completion sent by another
identity than the worker that ran the attempt was not the Agent's. The row still follows
Temporal (the workflow went on with that result), but its note says so, the audit entry says
so, and a critical alert names the identity, so an operator can check the service's own record.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from sas.state_store.alerts import active_alert, raise_alert
from sas.state_store.tables import Alert

# The Supervisor's logger: its alerts are logged under it, wherever they were raised.
log = logging.getLogger("sas.supervisor")


async def completed_from_outside(client: Client, task_id: str, run_id: str | None, activity_type: str) -> str | None:
    """Who completed the last completed attempt of ``activity_type`` in the run, if that was not
    the worker that ran it (None when the Agent itself answered, or nothing completed)."""
    history = await client.get_workflow_handle(task_id, run_id=run_id).fetch_history()
    types: dict[int, str] = {}
    started_by: dict[int, str] = {}
    outside: str | None = None
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            types[event.event_id] = event.activity_task_scheduled_event_attributes.activity_type.name
        elif event.HasField("activity_task_started_event_attributes"):
            started_by[event.event_id] = event.activity_task_started_event_attributes.identity
        elif event.HasField("activity_task_completed_event_attributes"):
            done = event.activity_task_completed_event_attributes
            if types.get(done.scheduled_event_id) == activity_type:
                ran = started_by.get(done.started_event_id)
                outside = done.identity if done.identity != ran else None
    return outside


def foreign_note(activity_type: str, identity: str) -> str:
    return (
        f"result not reported by an Agent: {activity_type} was completed in Temporal by {identity!r}, "
        "not by the worker that ran it (temporal activity complete?)"
    )


async def alert_foreign_result(
    sessions: async_sessionmaker[AsyncSession],
    task_id: str,
    step: str,
    activity_type: str,
    identity: str,
    now: datetime,
) -> bool:
    """Raise (or refresh) the one critical alert of the step's foreign result; True, and a log
    line, only when it is new."""
    key = f"foreign_result:{task_id}:{step}"
    message = f"task {task_id}: step {step}'s {foreign_note(activity_type, identity)}; the task went on with it"
    action = (
        f"check the service's own record for {task_id}:{step}; if it did nothing, the task's effects do not match: "
        f"`sas show {task_id}`, then undo by hand or `sas compensate {task_id}` if it is still running"
    )
    alert = Alert(
        incident_key=key,
        severity="critical",
        kind="foreign_result",
        task_id=task_id,
        step=step,
        failure_count=0,
        message=message,
        last_error=None,
        suggested_action=action,
        status="open",
        created_at=now,
        updated_at=now,
        delivery_attempts=0,
    )
    async with sessions() as session, session.begin():
        new = await active_alert(session, key) is None
        await raise_alert(session, alert)
    if new:
        fields = {"severity": "critical", "kind": "foreign_result", "task_id": task_id, "step": step}
        log.warning("alert", extra={"fields": {**fields, "message": message, "suggested_action": action}})
    return new
