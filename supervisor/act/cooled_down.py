"""The retries of cool-downs that ended together, let go in stages: before a sweep sends them, the
staged release of their service begins (``sas/breaker/backlog.py``), the one a closing breaker
begins, and every worker's gate paces their calls by it.

Why the Supervisor begins it and the gate enforces it: the tasks that failed together in an outage
cool down together, and it is the Supervisor that sees their retries come due in one sweep, for one
service, which no worker can tell from a single poll. It does not pace them itself (sending the
signals slowly): the calls are what must be paced, over every worker, and the gate already does
that from the breaker's row, with the canaries that stop the release and open the breaker if the
service is still down.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker.backlog import release_backlog
from sas.breaker.held import service_of_step
from sas.settings import Settings
from sas.state_store.queries import get_step
from sas.supervisor.models import Decision


async def release_cooled_down(
    sessions: async_sessionmaker[AsyncSession], settings: Settings, decisions: list[Decision]
) -> list[str]:
    """Begin the staged release of each service with more cooled-down retries among ``decisions``
    than its release's canaries; the services whose release began."""
    due = [d for d in decisions if d.kind == "retry" and d.cooled_down]
    if not due:
        return []
    async with sessions() as session:
        steps = [await get_step(session, d.task_id, d.step) for d in due]
    agents = [step.agent for step in steps if step is not None]
    backlog = Counter(service for agent in agents if (service := service_of_step(agent)) is not None)
    breakers = {service: settings.services.service(service).breaker for service in backlog}
    return await release_backlog(sessions, backlog, breakers, "cool-downs ended together")
