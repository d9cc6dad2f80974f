"""A service's backlog let go at once by someone other than its breaker: an operator retrying an
incident's tasks (``sas retry --incident``, ``sas/client/bulk.py``), or the Supervisor sending
the retries of cool-downs that ended together (``supervisor/act/apply.py``). Each begins the
very release a closing breaker does (``rows.begin_release``, ``release.py``) on the service's
row, before a single task is let go: canaries, then growing waves up to the service's normal
rate, one release over every worker, stopped and the breaker opened if the canaries fail.

Who begins it and who enforces it: whoever lets the backlog go knows how big it is and for which
service (the incident's members, the sweep's due retries), which no worker can see from one poll;
every worker's gate then takes its calls' turns from the shared row, as after an outage. So no
second pacing: the operator and the Supervisor only say "a release begins now".
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker.rows import begin_release
from sas.breaker.settings import BreakerSettings, release_plan

log = logging.getLogger("sas.breaker")

# The longest the one letting the backlog go waits for the workers to read the row (two of their
# reads): a worker that has not read it yet would let its first calls go unpaced. Bounded, since
# the Supervisor waits inside an activity that must heartbeat within 10 s.
MAX_WAIT_FOR_WORKERS_S = 3.0


async def release_backlog(
    sessions: async_sessionmaker[AsyncSession],
    backlog: Mapping[str, int],
    settings: Mapping[str, BreakerSettings],
    why: str,
) -> list[str]:
    """Begin a staged release on each service of ``backlog`` (service -> tasks about to be let go)
    with more tasks than its release's canaries (fewer would all go as canaries anyway), then wait
    until every worker has read it. The services whose release began; a service whose breaker
    holds, or whose release under way paces already, or that releases all at once, is left."""
    begun: list[str] = []
    for service, count in sorted(backlog.items()):
        breaker = settings.get(service)
        plan = release_plan(breaker) if breaker is not None else None
        if breaker is None or plan is None or count <= plan.canaries:
            continue
        async with sessions() as session:
            if await begin_release(session, service, datetime.now(UTC), plan):
                begun.append(service)
                log.warning("release of %s begun: %s (%d tasks)", service, why, count)
    if begun:
        await asyncio.sleep(min(max(2 * settings[s].sync_s for s in begun) + 0.1, MAX_WAIT_FOR_WORKERS_S))
    return begun
