"""What the Supervisor knows of the remote services' circuit breakers (``sas/breaker/service.py``):
which services' work is being held right now. A step of such a service gets no decision (it is
not failing, it is waiting, and its time is not counted), and an empty poller list on its task
queue is the breaker's doing, not a missing worker."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker.model import BreakerView
from sas.breaker.rows import read_breakers
from sas.task_models.queues import service_of


async def holding(sessions: async_sessionmaker[AsyncSession], now: datetime) -> dict[str, BreakerView]:
    """The breakers that hold their service's work at ``now``, by service (the rows say until
    when: the Supervisor needs none of the breakers' settings)."""
    async with sessions() as session:
        views = await read_breakers(session)
    return {name: view for name, view in views.items() if view.holding(now)}


def service_of_step(agent: str | None) -> str | None:
    """The service a step's Agent calls, or None for a name that is not an Agent's."""
    try:
        return service_of(agent) if agent else None
    except ValueError:
        return None
