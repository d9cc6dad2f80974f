"""Incidents: one operator alert for every task failing for one cause.

The Supervisor decides what an incident holds (``supervisor/alert/incident_check.py``); this module keeps
it: the incident's alert row (kind ``incident``, raised and resolved like any alert), what the
alert row has no column for (``incidents``), and its member tasks (``incident_tasks``), which
``sas retry|compensate|resubmit --incident ID`` acts on. The incident's id is its alert's id,
so ``sas alerts ack ID`` works on it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.alerts import ACTIVE, INCIDENT, owned_by, raise_alert, resolve_alert
from sas.state_store.incident_tables import Incident, IncidentTask
from sas.state_store.tables import Alert


@dataclass
class OpenIncident:
    """An incident not yet resolved, with its members by task id."""

    alert: Alert
    incident: Incident
    members: dict[str, IncidentTask] = field(default_factory=dict)


async def open_incidents(session: AsyncSession) -> list[OpenIncident]:
    """Every open or acknowledged incident, with its members."""
    rows = (
        await session.execute(
            select(Alert, Incident)
            .join(Incident, Incident.alert_id == Alert.id)
            .where(Alert.kind == INCIDENT, Alert.status.in_(ACTIVE))
            .order_by(Alert.id)
        )
    ).all()
    found = {alert.id: OpenIncident(alert, incident) for alert, incident in rows}
    if found:
        members = await session.scalars(select(IncidentTask).where(IncidentTask.alert_id.in_(list(found))))
        for m in members.all():
            found[m.alert_id].members[m.task_id] = m
    return list(found.values())


async def raise_incident(session: AsyncSession, alert: Alert, incident: Incident) -> tuple[Alert, Incident, bool]:
    """Open the incident of ``alert.incident_key`` (or fold this sighting into the one open, or
    reopen one an operator resolved). Inside the caller's transaction; True when it is new."""
    row = await raise_alert(session, alert)
    await session.flush()
    existing = await session.get(Incident, row.id)
    if existing is not None:
        return row, existing, False
    incident.alert_id = row.id
    session.add(incident)
    await session.flush()
    return row, incident, True


def join(session: AsyncSession, alert_id: int, task_id: str, step: str, at: datetime) -> IncidentTask:
    member = IncidentTask(alert_id=alert_id, task_id=task_id, step=step, joined_at=at)
    session.add(member)
    return member


async def leave(session: AsyncSession, alert_id: int, task_ids: list[str]) -> None:
    for i in range(0, len(task_ids), 500):
        await session.execute(
            delete(IncidentTask).where(
                IncidentTask.alert_id == alert_id, IncidentTask.task_id.in_(task_ids[i : i + 500])
            )
        )


def announce(alert: Alert) -> None:
    """Send the incident to the webhook again (it changed in a way worth a delivery)."""
    alert.delivered_at, alert.delivery_attempts, alert.next_delivery_at = None, 0, None


async def resolve_incident(session: AsyncSession, alert: Alert, at: datetime, why: str) -> None:
    """Close the incident by itself (its last task moved on) and send that to the webhook."""
    await resolve_alert(session, alert, at, why)
    announce(alert)


async def list_incidents(
    session: AsyncSession, status: str | None = None, limit: int = 100, task_types: Sequence[str] | None = None
) -> list[tuple[Alert, Incident]]:
    """Incidents, newest first; ``status`` one of the alert statuses, or None for all;
    ``task_types``: only those with a task of these types (a team's)."""
    query = select(Alert, Incident).join(Incident, Incident.alert_id == Alert.id).order_by(Alert.id.desc())
    if status is not None:
        query = query.where(Alert.status == status)
    if task_types is not None:
        query = query.where(owned_by(task_types))
    return [(a, i) for a, i in (await session.execute(query.limit(limit))).all()]


async def get_incident(session: AsyncSession, alert_id: int) -> tuple[Alert, Incident] | None:
    row = (
        await session.execute(
            select(Alert, Incident).join(Incident, Incident.alert_id == Alert.id).where(Alert.id == alert_id)
        )
    ).first()
    return None if row is None else (row[0], row[1])


async def incident_task_ids(session: AsyncSession, alert_id: int, limit: int) -> list[str]:
    """The incident's member tasks, the earliest to join first, at most ``limit``."""
    query = (
        select(IncidentTask.task_id)
        .where(IncidentTask.alert_id == alert_id)
        .order_by(IncidentTask.joined_at, IncidentTask.task_id)
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


def incident_view(alert: Alert, incident: Incident) -> dict[str, object]:
    """An incident as ``sas incidents --json`` prints it and the alert webhook sends it."""

    def when(at: datetime | None) -> str | None:
        return at.isoformat() if at is not None else None

    return {
        "id": alert.id,
        "status": alert.status,
        "severity": alert.severity,
        "service": incident.service,
        "step": incident.step,
        "error_type": incident.error_type,
        "error": incident.error_text,
        "task_count": incident.task_count,
        "parked": incident.parked,
        "first_at": when(incident.first_at),
        "latest_at": when(incident.latest_at),
        "next_look_at": when(incident.next_look_at),
        "sample_task_ids": list(incident.sample),
        "message": alert.message,
        "suggested_action": alert.suggested_action,
        "command": f"sas retry --incident {alert.id} --dry-run",
        "created_at": when(alert.created_at),
        "resolved_at": when(alert.resolved_at),
        "resolution": alert.resolution,
    }
