"""The staged release of a service's held work, once its breaker closes (a good probe, or an
operator's ``sas services close``): a few canaries alone, then waves of growing rate up to the
service's normal one (``ReleasePlan`` in ``model.py`` computes the allowance).

Without it, every held step would start at once: the service's worker polls again, and a
service just back from an outage would get its whole backlog in its first seconds.

The release is one for every worker: its start, its waves' start, the calls let through and the
canaries answered live in the breaker's shared row. Before each poll of the service's queue, a
worker's gate (``gate.py``) takes the next call's turn here, a conditional update of that count
below the allowance, on the state store's clock. So however many workers serve the service, it
sees one release. A canary that fails opens the breaker again (``service.py``), and the release
with it: the rest of the work stays held. The release ends when a whole wave's worth of its
allowance went unused, nobody having asked for it: the backlog has drained.

What it costs: one short write per call while a release is under way, none otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

from sqlalchemy import CursorResult, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker.model import BreakerView, ReleasePlan
from sas.state_store.rate_limits import store_now
from sas.state_store.tables import Breaker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = logging.getLogger("sas.breaker")

# The longest a worker waits before asking again: a canary's answer, or another worker's turn
# not taken, may make room sooner than the allowance says.
_ASK_EVERY_S = 0.25
# How long a worker waits before asking again when the store could not be read.
_ASK_AGAIN_AFTER_FAULT_S = 1.0
_ENDED: dict[str, Any] = {"release_since": None, "release_waves_at": None, "release_let": 0, "release_ok": 0}


@dataclass(frozen=True)
class Turn:
    """The store's answer to a worker asking for its next call's turn."""

    # go: poll now (a call let through, or the release has ended: ``ended``); wait: ask again
    # after ``wait_s``; held: the breaker is no longer closed, or the release is another one.
    outcome: Literal["go", "wait", "held"]
    wait_s: float = 0.0
    ended: bool = False


async def take_turn(session: AsyncSession, service: str, since: float, plan: ReleasePlan, canary_wait_s: float) -> Turn:
    """Let one more call of ``service`` through the release begun at ``since``, if its allowance
    has room now; commits. The canaries' stage ends once they have all answered, or
    ``canary_wait_s`` (a call's longest) after the release began with none failed."""
    async with session.begin():
        now = await store_now(session)
        row = await session.get(Breaker, service, populate_existing=True)
        if row is None or row.state != "closed":
            return Turn("held")
        if row.release_since is None:
            return Turn("go", ended=True)
        if row.release_since != since:
            return Turn("held")
        values: dict[str, Any] = {}
        waves_at = row.release_waves_at
        if waves_at is None and (row.release_ok >= plan.canaries or now >= since + canary_wait_s):
            waves_at = values["release_waves_at"] = now
        elapsed = None if waves_at is None else now - waves_at
        let = row.release_let
        if plan.drained(elapsed, let):
            await _counted(session, service, since, let, _ENDED)
            return Turn("go", ended=True)
        if let + 1 > plan.allowed(elapsed):
            if values:
                await _counted(session, service, since, let, values)
            return Turn("wait", plan.wait_s(elapsed, let))
        # Counted only if nobody counted since this read: of two workers, one takes the turn.
        if await _counted(session, service, since, let, values | {"release_let": let + 1}):
            return Turn("go")
        return Turn("wait")


async def canary_answered(session: AsyncSession, service: str, since: float) -> None:
    """One of the release's canaries answered as a service does; commits."""
    async with session.begin():
        await session.execute(
            update(Breaker)
            .where(Breaker.service == service, Breaker.release_since == since, Breaker.release_waves_at.is_(None))
            .values(release_ok=Breaker.release_ok + 1)
            .execution_options(synchronize_session=False)
        )


async def _counted(session: AsyncSession, service: str, since: float, let: int, values: dict[str, Any]) -> bool:
    result = await session.execute(
        update(Breaker)
        .where(Breaker.service == service, Breaker.release_since == since, Breaker.release_let == let)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return bool(cast("CursorResult[Any]", result).rowcount)


class Release:
    """One worker's part in a service's releases: its gate's turns, and its canaries' outcomes."""

    def __init__(
        self,
        service: str,
        plan: ReleasePlan | None,
        sessions: async_sessionmaker[AsyncSession] | None,
        canary_wait_s: float,
        jitter: float,
    ) -> None:
        self.service = service
        self.plan = plan
        self._sessions = sessions
        self._canary_wait_s = canary_wait_s
        self._jitter = jitter
        # One of the worker's pollers asks the store at a time; the others wait their turn here.
        self._asking = asyncio.Lock()
        self._ended: float | None = None  # a release this worker saw end, before its next read of the row
        # The release its gate took turns in, and how many of those turns no call has used yet.
        self._turns: tuple[float | None, int] = (None, 0)

    def under_way(self, view: BreakerView) -> bool:
        """Whether the row says a release is under way that this worker takes part in."""
        return (
            self.plan is not None
            and self._sessions is not None
            and view.state == "closed"
            and view.release_since is not None
            and view.release_since != self._ended
        )

    def at_canaries(self, view: BreakerView) -> bool:
        """Whether the release is at its canaries: their outcomes decide whether it goes on."""
        return self.under_way(view) and view.release_waves_at is None

    async def turn(self, view: Callable[[], BreakerView], refresh: Callable[[], Awaitable[None]]) -> bool:
        """Wait for the next call's turn in the release under way, if any. True: poll now; False:
        the breaker holds again (or began another release), and ``refresh`` has read it."""
        async with self._asking:
            while self.under_way(view()):
                since = view().release_since
                assert since is not None and self.plan is not None and self._sessions is not None
                try:
                    async with self._sessions() as session:
                        answer = await take_turn(session, self.service, since, self.plan, self._canary_wait_s)
                except (SQLAlchemyError, OSError) as err:
                    # No call goes out while the release cannot be read: it is asked again.
                    log.warning("release of %s unreadable, asking again: %s", self.service, err)
                    await asyncio.sleep(_ASK_AGAIN_AFTER_FAULT_S)
                    continue
                if answer.outcome == "go":
                    if answer.ended:
                        self._ended = since
                        log.info("release of %s ended: its backlog has drained", self.service)
                    else:
                        turns_of, left = self._turns
                        self._turns = (since, left + 1 if turns_of == since else 1)
                    return True
                if answer.outcome == "held":
                    await refresh()
                    return False
                await asyncio.sleep(min(answer.wait_s, _ASK_EVERY_S) * (1 + random.uniform(0, self._jitter)))
        return True

    def admits(self, view: BreakerView) -> bool:
        """Whether a call this worker polled may go to the service now: outside a release always;
        in one, only as many calls as the turns its gate took in it.

        A release begun while the service was not held (an incident retried, cool-downs ended
        together) finds the worker's polls already waiting on Temporal, let go before there was a
        turn to take: the first tasks of the backlog would reach the service past the canaries.
        Such a call is refused as a held one is (``BreakerOpen``, no attempt spent), and the
        Scheduler starts it again, to wait for a turn like the rest."""
        if not self.under_way(view):
            return True
        turns_of, left = self._turns
        if turns_of != view.release_since or left <= 0:
            return False
        self._turns = (turns_of, left - 1)
        return True

    async def canary_answered(self, view: BreakerView) -> None:
        """Count one canary's good answer (a background write of the caller's)."""
        if self._sessions is None or view.release_since is None:
            return
        async with self._sessions() as session:
            await canary_answered(session, self.service, view.release_since)
