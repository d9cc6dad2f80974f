"""Incidents: one cause failing many tasks at once (``supervisor/alert/incident_check.py``), as the
Supervisor recorded them. An incident is an alert (its id is the alert's); acknowledging or
resolving it moves the alert by its state machine (docs/operator.md). Its tasks are acted on
exactly with a bulk action whose selection names the incident (``bulk.Selection(incident=ID)``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sas.client.errors import InvalidInput, TaskNotFound
from sas.client.store import StateStore

STATUSES = ("open", "acked", "resolved", "active", "all")
MAX_LIMIT = 1000


@dataclass(frozen=True)
class IncidentView:
    """One incident: its cause (service, step, error), how many tasks it holds (``parked`` of
    them parked), when, what to do, and ``task_ids`` (the first ``limit``) when asked for one.
    ``data`` is the JSON ``sas incidents --json`` prints."""

    id: int
    status: str
    severity: str
    service: str | None
    step: str
    error_type: str | None
    error: str
    task_count: int
    parked: int
    first_at: datetime
    latest_at: datetime
    next_look_at: datetime | None
    message: str
    suggested_action: str
    resolution: str | None
    data: dict[str, Any]
    task_ids: list[str] = field(default_factory=list)
    # The staged release under way on its service, as `sas services` says it ("releasing: ..."):
    # after `sas retry --incident`, the tasks go to the service in canaries, then waves.
    release: str | None = None

    @classmethod
    def of(
        cls, alert: Any, incident: Any, task_ids: list[str] | None = None, release: str | None = None
    ) -> IncidentView:
        from sas.state_store.incidents import incident_view

        return cls(
            id=alert.id,
            status=alert.status,
            severity=alert.severity,
            service=incident.service,
            step=incident.step,
            error_type=incident.error_type,
            error=incident.error_text,
            task_count=incident.task_count,
            parked=incident.parked,
            first_at=incident.first_at,
            latest_at=incident.latest_at,
            next_look_at=incident.next_look_at,
            message=alert.message,
            suggested_action=alert.suggested_action,
            resolution=alert.resolution,
            data=incident_view(alert, incident) | {"release": release},
            task_ids=list(task_ids or []),
            release=release,
        )


def _check(status: str, limit: int) -> None:
    if status not in STATUSES:
        raise InvalidInput(f"--status {status!r}: unknown status", f"use one of: {', '.join(STATUSES)}", field="status")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"--limit {limit}: must be 1 to {MAX_LIMIT}", field="limit")


async def list_incidents(
    store: StateStore,
    status: str = "active",
    limit: int = 100,
    releases: Mapping[str, str] | None = None,
    team: str | None = None,
) -> list[IncidentView]:
    """Incidents, newest first: ``active`` (open or acked), ``open``, ``acked``, ``resolved`` or ``all``.
    ``releases``: the staged release under way on each service that has one, as ``sas services``
    words it (``TaskClient.services``), said beside its incidents. ``team``: only the incidents
    with a task of that team's types."""
    releases = releases or {}
    types = None
    if team is not None:
        from sas.client.teams import team_types  # the task types, read only for a team

        types = team_types(team)
    from sas.state_store.alerts import ACTIVE
    from sas.state_store.incidents import list_incidents as query

    _check(status, limit)
    wanted = None if status in ("all", "active") else status

    async def load(session: Any) -> list[IncidentView]:
        rows = await query(session, wanted, limit, types)
        return [
            IncidentView.of(a, i, release=releases.get(i.service or ""))
            for a, i in rows
            if status != "active" or a.status in ACTIVE
        ]

    return await store.read(load)


async def get_incident(
    store: StateStore, incident_id: int, limit: int = 100, releases: Mapping[str, str] | None = None
) -> IncidentView:
    """One incident with the ids of its tasks (the first ``limit``, the earliest to join first);
    ``releases`` as for ``list_incidents``."""
    releases = releases or {}
    from sas.state_store.incidents import get_incident as find
    from sas.state_store.incidents import incident_task_ids

    _check("all", limit)

    async def load(session: Any) -> IncidentView | None:
        found = await find(session, incident_id)
        if found is None:
            return None
        alert, incident = found
        release = releases.get(incident.service or "")
        return IncidentView.of(alert, incident, await incident_task_ids(session, incident_id, limit), release)

    view = await store.read(load)
    if view is None:
        raise TaskNotFound(f"no incident {incident_id}", "see the ids with `sas incidents --status all`")
    return view


async def set_incident(store: StateStore, incident_id: int, action: str) -> tuple[str, str]:
    """Acknowledge (``ack``) or ``resolve`` an incident by its alert's state machine; its status
    before and after (the same when the move does not apply: it is already there or beyond)."""
    from sas.state_store.alerts import set_alert_status
    from sas.state_store.incidents import get_incident as find

    if action not in ("ack", "resolve"):
        raise InvalidInput(f"unknown action {action!r}: ack or resolve", field="action")

    async def act(session: Any) -> tuple[str, str] | None:
        async with session.begin():
            known = await find(session, incident_id)
        if known is None:
            return None
        change = await set_alert_status(session, incident_id, action, datetime.now(UTC))
        return (change.before or "", change.after or "")

    moved = await store.session(act)
    if moved is None:
        raise TaskNotFound(f"no incident {incident_id}", "see the ids with `sas incidents --status all`")
    return moved
