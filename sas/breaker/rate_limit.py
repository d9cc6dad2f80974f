"""A service's rate limit as every worker keeps it together: a call takes one of the service's
permits from the state store before its request leaves, and gives it back once the exchange has
ended, the permit free again a second later (``sas/state_store/rate_limits.py`` says why that
bounds what the service sees in any second, whoever sent it and however long it took).

Temporal's own limit on the service's queue (``max_task_queue_activities_per_second``) stays:
it keeps the backlog in Temporal. But it is a token bucket in the matching service that lets a
burst of up to N through on top of N a second, and it counts activity tasks handed out, not
requests arriving. This is what the service is promised.

In a worker, one call at a time asks the store for the service's permit (the others wait their
turn in memory), so a backlog costs the store one query per worker and service at a time.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker.service import ServiceBreaker
from sas.state_store.rate_limits import give_back, take_lease

log = logging.getLogger(__name__)

# The longest a waiting call sleeps before asking again: a permit held by a call in flight is
# free a second after that call ends, which the store cannot say in advance.
_ASK_EVERY_S = 0.05
# Added to a lease beyond the longest the call could last: the moments between taking the
# permit and sending, and after the answer, before the permit is given back.
_LEASE_MARGIN_S = 1.0
# How long a call waits before asking again when the store could not be read.
_ASK_AGAIN_AFTER_FAULT_S = 1.0


@dataclass(frozen=True)
class Permit:
    """One of a service's permits, held by one call."""

    slot: int
    holder: str


class SharedRateLimit:
    """At most ``per_second`` calls a second at the service, over every worker sharing the store.

    ``permits``: how many calls may be under way within ``hold_s`` (``floor(per_second)`` in 1 s;
    below one a second, one call in ``1 / per_second`` s)."""

    def __init__(self, service: str, per_second: float, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.service = service
        self.permits = max(1, math.floor(per_second))
        self.hold_s = max(1.0, 1.0 / per_second)
        self._sessions = sessions
        self._turn = asyncio.Lock()

    @classmethod
    def of(cls, breaker: ServiceBreaker | None, per_second: float | None) -> SharedRateLimit | None:
        """The limit of the service whose breaker this is (the worker's handle on the service's
        shared rows), or None: no limit set, or no state store to share it through."""
        if breaker is None or per_second is None or breaker._sessions is None:
            return None
        return cls(breaker.service, per_second, breaker._sessions)

    async def take(self, longest_s: float) -> Permit:
        """One of the service's permits, for a call whose exchange ends within ``longest_s``.
        Waits for one, without end: the caller bounds the wait."""
        holder = uuid.uuid4().hex
        lease_s = longest_s + self.hold_s + _LEASE_MARGIN_S
        async with self._turn:
            while True:
                slot, wait_s = await self._take(holder, lease_s)
                if slot is not None:
                    return Permit(slot, holder)
                await asyncio.sleep(min(wait_s, _ASK_EVERY_S))

    async def give_back(self, permit: Permit) -> None:
        """The call's exchange has ended: its permit is free again ``hold_s`` from now. Given
        back even while the attempt is being cancelled; if the store cannot be written, the
        lease runs out instead."""
        await asyncio.shield(self._give_back(permit))

    async def _take(self, holder: str, lease_s: float) -> tuple[int | None, float]:
        try:
            async with self._sessions() as session:
                return await take_lease(session, self.service, self.permits, holder, lease_s)
        except (SQLAlchemyError, OSError) as err:
            # No call goes out while the limit cannot be read: it is asked again.
            log.warning("rate limit of %s unreadable, asking again: %s", self.service, err)
            return None, _ASK_AGAIN_AFTER_FAULT_S

    async def _give_back(self, permit: Permit) -> None:
        try:
            async with self._sessions() as session:
                await give_back(session, self.service, permit.slot, permit.holder, self.hold_s)
        except (SQLAlchemyError, OSError) as err:
            log.warning("rate limit of %s: a permit not given back frees when its lease ends: %s", self.service, err)
