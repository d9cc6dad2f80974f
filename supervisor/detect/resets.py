"""A reset run followed by itself: the mirror names the run Temporal runs, with no operator command.

A reset (``temporal workflow reset``, the UI's reset) starts a new run of the task's chain. A
reset to an early point makes the new run write its own rows; but a reset to the last workflow
task of a finished task replays the old run's writes, which the rows already hold, so nothing
tells the mirror, and it goes on naming the old run. At every orphan check the Supervisor asks
Temporal's visibility for the runs started on the task queue since its last look and, for each
task the mirror records under another run, reconciles it: ``reconcile_task`` adopts a newer run
of the task's own chain, audited, and leaves a run of another chain (a refused reuse of the id)
alone. New tasks cost one row read each; a task's own first run is already the mirror's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from sas.reconciliation.repairs import Reconciliation, reconcile_task
from sas.state_store.queries import runs_of
from sas.supervisor.activity_support import beat
from sas.supervisor.per_task import isolated

# On a Supervisor's first look: how far back a reset is still followed.
FIRST_LOOKBACK = timedelta(minutes=10)
# Visibility is eventually consistent: each look starts this far before the last one's time.
_OVERLAP = timedelta(seconds=10)
# Task ids asked of the state store at once.
_CHUNK = 500


class ResetFollower:
    """Keeps, per Supervisor process, when it last looked."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, task_queue: str) -> None:
        self._sessions = sessions
        self._client = client
        self._task_queue = task_queue
        self._since: datetime | None = None

    async def follow(self, buckets: tuple[int, int] | None) -> int:
        """Reconcile the tasks of ``buckets`` whose newest run is not the mirror's; the rows repaired."""
        now = datetime.now(UTC)
        since = (self._since or now - FIRST_LOOKBACK) - _OVERLAP
        query = f"TaskQueue = '{self._task_queue}' AND StartTime >= '{since.isoformat().replace('+00:00', 'Z')}'"
        newest: dict[str, tuple[datetime, str]] = {}
        async for run in self._client.list_workflows(query):
            started = run.start_time
            if run.id not in newest or started > newest[run.id][0]:
                newest[run.id] = (started, run.run_id)
        repaired = 0
        ids = list(newest)
        for i in range(0, len(ids), _CHUNK):
            async with self._sessions() as session:
                recorded = await runs_of(session, ids[i : i + _CHUNK], buckets)
            for task_id, (run_id, chain_id) in recorded.items():
                if chain_id is None or run_id == newest[task_id][1]:
                    continue
                beat()
                found = await isolated(
                    self._sessions,
                    task_id,
                    "reset check",
                    partial(reconcile_task, self._sessions, self._client, task_id),
                )
                repaired += len(found.repairs) if isinstance(found, Reconciliation) else 0
        self._since = now
        return repaired
