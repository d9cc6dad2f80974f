"""The audit entries that ``sas`` writes itself, for actions no workflow applies: cancelling or
rescheduling a delayed task, cancelling a schedule, parking or un-parking a running step.

They go to the same log as the Scheduler's own entries (``sas show`` prints both). Each is
written *before* its action, as requested, and settled once Temporal has answered: what was
done, or why nothing was. An action that was taken therefore always has its entry, even when
the state store goes away or the command is killed in between (the entry then still says
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

from sas.cli import context
from sas.cli.output import CliError
from sas.state_store.tables import AuditEntry
from sas.task_models.text import reject_control

# The Scheduler keys its entries by (task, run, seq); ours get a run id of their own, so two
# operators acting on the same run never collide with each other or with the Scheduler.
_RUN_PREFIX = "sas:"
# The same bounds as OperatorRequest's ``by`` and ``reason`` (and the audit log's actor column).
MAX_BY = 200
MAX_REASON = 2000
_REQUESTED = "requested; Temporal's answer not recorded (the command stopped before it)"


def actor(by: str | None) -> str:
    """Who is acting: ``--by``, else the login name, marked as coming through sas; refused in
    one line when it is longer than the log keeps or holds a control character."""
    who = by or f"{os.environ.get('USER', 'operator')} (sas)"
    _check("--by", who, MAX_BY)
    return who


def check_reason(reason: str) -> str:
    """``--reason`` within the log's bound, without control characters (one line if not)."""
    return _check("--reason", reason, MAX_REASON)


def _check(flag: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise CliError(f"{flag} is {len(value)} characters long: at most {limit}", code=2)
    try:
        return reject_control(value)
    except ValueError as err:
        raise CliError(f"{flag} {err}", code=2) from None


@dataclass
class Entry:
    """An audit entry written ahead of its action; ``changed`` is what the action did."""

    id: int
    changed: str = ""


@asynccontextmanager
async def audited(task_id: str, action: str, by: str, reason: str, step: str | None = None) -> AsyncIterator[Entry]:
    """Write the entry, run the action (the ``with`` body, which sets ``entry.changed``), then
    settle the entry with what it did, or with why it did nothing when the body raised."""
    _check("--by", by, MAX_BY)
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

    written = Entry(id=await context.with_session(write))
    try:
        yield written
    except BaseException as err:
        await _settle(written.id, f"not done: {_one_line(err)}")
        raise
    await _settle(written.id, written.changed or "done")


async def _settle(entry_id: int, changed: str) -> None:
    async def write(session: AsyncSession) -> None:
        async with session.begin():
            await session.execute(update(AuditEntry).where(AuditEntry.id == entry_id).values(changed=changed))

    await context.with_session(write)


def _one_line(err: BaseException) -> str:
    text = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())[:500]
