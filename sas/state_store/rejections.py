"""Writes the database refuses for good, told apart from outages, and raised as one alert.

A lost connection, a lock or a server restart goes away: those writes are retried. A value the
database will never take (a number out of range, a constraint it breaks, text it cannot store)
fails the same way on every try, so retrying it would loop for ever. Such a write is given up,
the mirror row stays as it was (Temporal still runs the task, and reconciliation can write the
row later), and an operator is told once per task and kind of write.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

import asyncpg
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.alerts import active_alert, raise_alert
from sas.state_store.tables import Alert
from sas.task_models.text import clean_text

ALERT_KIND = "mirror_write_rejected"

# Refusals about the data itself. SQLAlchemy wraps the drivers' errors in DataError and
# IntegrityError; the SQLite step writer uses the driver directly; Python's own sqlite3 binding
# raises OverflowError for an integer SQLite cannot hold; asyncpg raises its DataError before
# sending a value PostgreSQL cannot take (also NUL in text) and IntegrityConstraintViolationError
# for a broken constraint.
_REFUSED_FOR_GOOD: tuple[type[BaseException], ...] = (
    sa_exc.DataError,
    sa_exc.IntegrityError,
    sqlite3.DataError,
    sqlite3.IntegrityError,
    OverflowError,
    asyncpg.exceptions.DataError,
    asyncpg.exceptions._base.DataError,  # the client-side one: a value it cannot encode
    asyncpg.exceptions.IntegrityConstraintViolationError,
)


def refused_for_good(err: BaseException) -> bool:
    """Whether retrying ``err``'s write can never succeed (the data, not the database)."""
    return isinstance(err, _REFUSED_FOR_GOOD)


def describe(err: BaseException, limit: int = 500) -> str:
    """One storable line: the error's type and its first line, control characters cleaned."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return clean_text(f"{type(err).__name__}: {first}")[:limit]


async def alert_refused_write(
    session: AsyncSession, task_id: str, step: str | None, what: str, err: BaseException, now: datetime
) -> bool:
    """Raise (or fold into) the one alert for ``task_id``'s refused ``what`` write.

    Returns whether the incident is new, so the caller logs it once."""
    key = f"{ALERT_KIND}:{task_id}:{what}"
    async with session.begin():
        new = await active_alert(session, key) is None
        await raise_alert(
            session,
            Alert(
                incident_key=key,
                severity="critical",
                kind=ALERT_KIND,
                task_id=task_id,
                step=step,
                failure_count=0,
                message=(
                    f"task {task_id}: the state store refused its {what} write for good; Temporal carries on, "
                    "the mirror row is stale"
                ),
                last_error=describe(err),
                suggested_action=(
                    "read last_error; fix the data or the schema, then `sas reconcile --task "
                    f"{task_id}` to write the row from Temporal's state, and `sas alerts resolve`"
                ),
                status="open",
                created_at=now,
                updated_at=now,
                delivery_attempts=0,
            ),
        )
    return new
