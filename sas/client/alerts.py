"""The operator alerts the Supervisor raised (``TaskClient.alerts``), and an operator's hand on
them: acknowledge, resolve, by the alerts' state machine (docs/operator.md). A task's alert
folded into an open incident is counted, not listed, unless asked for (``folded``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from sas.client.errors import InvalidInput, TaskNotFound
from sas.client.store import StateStore


@dataclass(frozen=True)
class AlertView:
    """One alert: how bad (``severity``), what (``kind``, ``message``, ``last_error``), of which
    task and step (None for a service's or an incident's), the FailureCount it was raised at
    (an incident's: how many tasks), what to do, and where it stands (open, acked, resolved)."""

    id: int
    severity: str
    kind: str
    task_id: str | None
    step: str | None
    failure_count: int
    message: str
    last_error: str | None
    suggested_action: str
    status: str
    created_at: datetime
    updated_at: datetime

    @property
    def data(self) -> dict[str, Any]:
        """The alert as ``sas alerts --json`` prints it."""
        return asdict(self)


@dataclass(frozen=True)
class AlertList:
    """The alerts asked for, newest first, and ``folded``: how many more (of that status) are
    folded into open incidents and not listed (0 when they were asked for too)."""

    alerts: list[AlertView]
    folded: int


@dataclass(frozen=True)
class AlertChange:
    """What an acknowledge or resolve did: ``before`` -> ``after``; ``changed`` False when the
    state machine does not allow the move (the alert is already there or beyond)."""

    alert_id: int
    before: str
    after: str
    changed: bool


def _statuses() -> tuple[str, ...]:
    from sas.state_store.alerts import ALERT_STATUSES

    return ALERT_STATUSES


async def list_alerts(
    store: StateStore, status: str, limit: int, *, folded: bool, team: str | None = None
) -> AlertList:
    """Alerts in ``status`` (open, acked, resolved or all), newest first, at most ``limit``;
    with ``team``, only the ones that team owns."""
    from sas.state_store.alerts import count_folded
    from sas.state_store.alerts import list_alerts as query

    types = None
    if team is not None:
        # Only then are the task types read (a team is what they name): a plain read of alerts
        # stays a read of the state store.
        from sas.client.teams import team_types

        types = team_types(team)
    if status not in (*_statuses(), "all"):
        raise InvalidInput(
            f"--status {status!r}: unknown status", f"use one of: {', '.join(_statuses())}, all", field="status"
        )
    if limit < 1:
        raise InvalidInput(f"--limit {limit}: must be at least 1", field="limit")
    wanted = None if status == "all" else status

    async def load(session: Any) -> AlertList:
        rows = await query(session, wanted, limit, include_folded=folded, task_types=types)
        views = [AlertView(**{f: getattr(a, f) for f in AlertView.__dataclass_fields__}) for a in rows]
        return AlertList(views, 0 if folded else await count_folded(session, wanted, types))

    return await store.read(load)


async def set_alert(store: StateStore, alert_id: int, action: str) -> AlertChange:
    """Acknowledge (``ack``) or ``resolve`` an alert by the state machine: a move it does not
    allow changes nothing (``changed`` False). Only an unknown id is refused (``TaskNotFound``)."""
    from sas.state_store.alerts import set_alert_status

    if action not in ("ack", "resolve"):
        raise InvalidInput(f"unknown action {action!r}: ack or resolve", field="action")

    async def act(session: Any) -> Any:
        return await set_alert_status(session, alert_id, action, datetime.now(UTC))

    change = await store.session(act)
    if change.before is None:
        raise TaskNotFound(f"no alert {alert_id}", "see the ids with `sas alerts --status all`")
    return AlertChange(alert_id, change.before, change.after or change.before, change.changed)
