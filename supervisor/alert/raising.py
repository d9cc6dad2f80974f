"""How the Supervisor writes and logs its alerts and decisions: one alert per incident key,
raised once and refreshed after, resolved by key; a log line for each new one."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.state_store import tables
from sas.state_store.alerts import active_alert, raise_alert, resolve_alert
from sas.supervisor.models import AlertSpec

log = logging.getLogger("sas.supervisor")


def alert_row(
    spec: AlertSpec,
    task_id: str | None,
    step: str | None,
    failure_count: int,
    last_error: str | None,
    now: datetime,
    key: str | None = None,
) -> tables.Alert:
    """The alert ``spec`` describes, keyed by ``key`` or else by its kind, task and step."""
    return tables.Alert(
        incident_key=key or f"{spec.kind}:{task_id}:{step}",
        severity=spec.severity,
        kind=spec.kind,
        task_id=task_id,
        step=step,
        failure_count=failure_count,
        message=spec.message,
        last_error=last_error,
        suggested_action=spec.suggested_action,
        status="open",
        created_at=now,
        updated_at=now,
        delivery_attempts=0,
    )


async def raise_once(
    sessions: async_sessionmaker[AsyncSession],
    spec: AlertSpec,
    key: str,
    now: datetime,
    *,
    task_id: str | None = None,
    step: str | None = None,
    failure_count: int = 0,
) -> bool:
    """Open the alert of incident ``key``, or refresh the one already open; True (and a log
    line) only when it is new, so a condition seen on every sweep is logged once."""
    async with sessions() as session, session.begin():
        new = await raise_in(session, spec, key, now, task_id=task_id, step=step, failure_count=failure_count)
    if new:
        log_alert(spec, task_id, step, failure_count, None)
    return new


async def raise_in(
    session: AsyncSession,
    spec: AlertSpec,
    key: str,
    now: datetime,
    *,
    task_id: str | None = None,
    step: str | None = None,
    failure_count: int = 0,
) -> bool:
    """:func:`raise_once` inside the caller's transaction, so the alert lands with the rows it
    explains; the caller logs a new one (:func:`log_alert`) once the transaction commits."""
    new = await active_alert(session, key) is None
    await raise_alert(session, alert_row(spec, task_id, step, failure_count, None, now, key=key))
    return new


async def resolve_key(sessions: async_sessionmaker[AsyncSession], key: str, now: datetime, why: str) -> int:
    """Resolve the open alert of incident ``key``: 1 if there was one, else 0."""
    async with sessions() as session, session.begin():
        alert = await active_alert(session, key)
        if alert is None:
            return 0
        await resolve_alert(session, alert, now, why)
    log.info("alert resolved", extra={"fields": {"incident_key": key, "why": why}})
    return 1


def log_decision(task_id: str, step: str, kind: str, failure_count: int, reason: str) -> None:
    log.info(
        "decision",
        extra={
            "fields": {
                "task_id": task_id,
                "step": step,
                "decision": kind,
                "failure_count": failure_count,
                "reason": reason,
            }
        },
    )


def log_alert(
    spec: AlertSpec, task_id: str | None, step: str | None, failure_count: int, last_error: str | None
) -> None:
    log.warning(
        "alert",
        extra={
            "fields": {
                "severity": spec.severity,
                "kind": spec.kind,
                "task_id": task_id,
                "step": step,
                "failure_count": failure_count,
                "message": spec.message,
                "last_error": last_error,
                "suggested_action": spec.suggested_action,
            }
        },
    )
