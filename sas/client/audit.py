"""The audit entries the client writes itself, for actions no workflow applies: cancelling or
rescheduling a delayed task, cancelling a schedule, parking or un-parking a running step.

They go to the same log as the Scheduler's own entries (``sas show`` prints both). Each is
written *before* its action, as requested, and settled once Temporal has answered: what was
done, or why nothing was. An action that was taken therefore always has its entry, even when
the state store goes away or the caller is killed in between (the entry then still says
"requested", which is the truth as far as anyone can know). Who and why are checked before
anything is written or done, against the same bounds as a signal's ``by`` and ``reason``."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from sas.client.errors import InvalidInput
from sas.client.store import StateStore
from sas.state_store.tables import AuditEntry
from sas.task_models.text import reject_control

# The Scheduler keys its entries by (task, run, seq); ours get a run id of their own, so two
# operators acting on the same run never collide with each other or with the Scheduler.
_RUN_PREFIX = "sas:"
# The same bounds as OperatorRequest's ``by`` and ``reason`` (and the audit log's actor column).
MAX_BY = 200
MAX_REASON = 2000
_REQUESTED = "requested; Temporal's answer not recorded (the command stopped before it)"


def default_actor() -> str:
    """Who acts when the caller does not say: the login name, marked as coming through sas."""
    return f"{os.environ.get('USER', 'operator')} (sas)"


def check_actor(by: str | None, name: str = "by") -> str:
    """``by``, else ``default_actor()``; refused when longer than the log keeps or holding a
    control character. ``name`` is how the caller calls the argument (``--by`` on the command line)."""
    return _check(name, by or default_actor(), MAX_BY)


def check_reason(reason: str, name: str = "reason") -> str:
    """``reason`` within the log's bound, without control characters."""
    return _check(name, reason, MAX_REASON)


def _check(name: str, value: str, limit: int) -> str:
    field = name.lstrip("-")
    if len(value) > limit:
        raise InvalidInput(f"{name} is {len(value)} characters long: at most {limit}", field=field)
    try:
        return reject_control(value)
    except ValueError as err:
        raise InvalidInput(f"{name} {err}", field=field) from None


@dataclass
class Entry:
    """An audit entry written ahead of its action; ``changed`` is what the action did."""

    id: int
    changed: str = ""


@asynccontextmanager
async def audited(
    store: StateStore, task_id: str, action: str, by: str, reason: str, step: str | None = None
) -> AsyncIterator[Entry]:
    """Write the entry, run the action (the ``with`` body, which sets ``entry.changed``), then
    settle the entry with what it did, or with why it did nothing when the body raised."""
    check_actor(by)
    check_reason(reason)
    entry = AuditEntry(
        task_id=task_id,
        run_id=f"{_RUN_PREFIX}{uuid.uuid4().hex}",
        seq=0,
        step=step,
        action=action,
        actor=by,
        reason=reason,
        changed=_REQUESTED,
        at=datetime.now(UTC),
    )

    async def write(session: AsyncSession) -> int:
        async with session.begin():
            session.add(entry)
            await session.flush()
            return entry.id

    written = Entry(id=await store.session(write))
    try:
        yield written
    except BaseException as err:
        await _settle(store, written.id, f"not done: {_one_line(err)}")
        raise
    await _settle(store, written.id, written.changed or "done")


async def _settle(store: StateStore, entry_id: int, changed: str) -> None:
    async def write(session: AsyncSession) -> None:
        async with session.begin():
            await session.execute(update(AuditEntry).where(AuditEntry.id == entry_id).values(changed=changed))

    await store.session(write)


def _one_line(err: BaseException) -> str:
    text = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())[:500]
