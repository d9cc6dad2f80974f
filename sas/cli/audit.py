"""The audit entries that ``sas`` writes itself, for actions no workflow applies: cancelling or
rescheduling a delayed task, cancelling a schedule, parking or un-parking a running step.

They go to the same log as the Scheduler's own entries (``sas show`` prints both). Each is
written only after Temporal has confirmed the action: the log records what happened."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from sas.cli import context
from sas.state_store.tables import AuditEntry

# The Scheduler keys its entries by (task, run, seq); ours get a run id of their own, so two
# operators acting on the same run never collide with each other or with the Scheduler.
_RUN_PREFIX = "sas:"


def actor(by: str | None) -> str:
    """Who is acting: ``--by``, else the login name, marked as coming through sas."""
    return by or f"{os.environ.get('USER', 'operator')} (sas)"


async def check_reachable() -> None:
    """Fail before acting, not after: an action Temporal has taken must not go unaudited
    because the state store was down (raises StateStoreUnreachable, one line)."""
    from sqlalchemy import select

    async def probe(session: AsyncSession) -> None:
        await session.execute(select(AuditEntry.id).limit(1))

    await context.with_session(probe)


async def record(task_id: str, action: str, by: str, reason: str, changed: str, step: str | None = None) -> None:
    """Append one entry to the audit log, in its own transaction."""
    entry = AuditEntry(
        task_id=task_id,
        run_id=f"{_RUN_PREFIX}{uuid.uuid4().hex}",
        seq=0,
        step=step,
        action=action,
        actor=by,
        reason=reason,
        changed=changed,
        at=datetime.now(UTC),
    )

    async def write(session: AsyncSession) -> None:
        async with session.begin():
            session.add(entry)

    await context.with_session(write)
