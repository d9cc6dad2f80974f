"""The services' rate limits, shared by every worker: ``rate_leases``, a few rows per service.

A service limited to N calls per second has ``permits`` rows (N, whole; one below 1 a second).
A call takes a free row before its request leaves and gives it back once the exchange has ended,
free again ``hold_s`` later (1 s; 1/N s below 1 a second). A request reaches the service after it
is sent and before its answer is read, so no window of ``hold_s`` at the service can hold more
requests than there are rows, however long each took on the way and whichever worker sent it.

Every time here is the state store's clock (PostgreSQL's, or the one host's that SQLite lives
on), never a worker's: two workers' clocks may disagree, the store's is one. A worker that dies
holding a row loses it for at most the longest its call could have lasted (``lease_s``).
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, Float, Integer, String, func, literal, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from sas.state_store.tables import Base


class RateLease(Base):
    """One of a service's permits: who holds it, and from when it is free (the store's clock)."""

    __tablename__ = "rate_leases"

    service: Mapped[str] = mapped_column(String(40), primary_key=True)
    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), doc="The call holding it; None once given back.")
    free_at: Mapped[float] = mapped_column(Float, doc="Seconds since the epoch on the state store's clock.")


async def store_now(session: AsyncSession) -> float:
    """The state store's clock, in seconds since the epoch."""
    if session.get_bind().dialect.name == "postgresql":
        clock: Any = func.extract("epoch", func.clock_timestamp())
    else:
        # SQLite's 'now' is the host's clock to the millisecond (julianday's day 2440587.5 is 1970-01-01).
        clock = (func.julianday("now") - literal(2440587.5)) * literal(86400.0)
    return float(await session.scalar(select(clock)) or 0.0)


async def _ensure_slots(session: AsyncSession, service: str, permits: int) -> None:
    rows = [{"service": service, "slot": n, "holder": None, "free_at": 0.0} for n in range(permits)]
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    await session.execute(insert(RateLease).values(rows).on_conflict_do_nothing())


async def take_lease(
    session: AsyncSession, service: str, permits: int, holder: str, lease_s: float
) -> tuple[int | None, float]:
    """Take one of the service's free permits for ``holder`` until it gives it back, or for
    ``lease_s`` at most; commits. The permit's slot (None if none is free) and the seconds until
    the soonest one frees (0 when taken)."""
    now = await store_now(session)
    seen = (
        await session.execute(
            select(RateLease.slot, RateLease.free_at)
            .where(RateLease.service == service, RateLease.slot < permits)
            .order_by(RateLease.free_at)
        )
    ).all()
    if len(seen) < permits:
        await _ensure_slots(session, service, permits)
        await session.commit()
        return await take_lease(session, service, permits, holder, lease_s)
    for slot, free_at in seen:
        if free_at > now:
            break
        # Taken only if still free: of two workers that saw it free, one takes it.
        taken = await session.execute(
            update(RateLease)
            .where(RateLease.service == service, RateLease.slot == slot, RateLease.free_at <= now)
            .values(holder=holder, free_at=now + lease_s)
            .execution_options(synchronize_session=False)
        )
        if cast("CursorResult[Any]", taken).rowcount:
            await session.commit()
            return slot, 0.0
    await session.rollback()
    soonest = min(free_at for _, free_at in seen)
    return None, max(soonest - now, 0.0)


async def give_back(session: AsyncSession, service: str, slot: int, holder: str, hold_s: float) -> None:
    """The call's exchange has ended: its permit is free ``hold_s`` from now; commits. A permit
    whose lease ran out and was taken by another call is left to that call."""
    now = await store_now(session)
    await session.execute(
        update(RateLease)
        .where(RateLease.service == service, RateLease.slot == slot, RateLease.holder == holder)
        .values(holder=None, free_at=now + hold_s)
        .execution_options(synchronize_session=False)
    )
    await session.commit()
