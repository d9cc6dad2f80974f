"""Workflows closed from outside lately, asked of Temporal rather than waited for.

The orphan check finds a workflow closed from outside (terminated from the UI, timed out,
cancelled, failed) when its task's turn comes among the quiet open tasks, ``ORPHAN_BATCH`` a
round: at 100,000 open tasks a whole turn takes hours. So at every orphan check the Supervisor
also asks Temporal's visibility for the workflows on its task queue closed so, and not
completed, since its last look, and the check takes those the mirror says are open first.

Only the order changes, not the rule: a task is taken once it is quiet (untouched for
``ORPHAN_AFTER_S``), as every task the orphan check looks at. A reset terminates the run it
replaces, and its new run writes the rows soon after; a task found before it is quiet waits here
for it. What one round cannot take waits for the next one, in the order found; nothing is decided
on the list's word alone: each task is looked up in Temporal again (``OrphanActivities._check``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from sas.state_store.queries import open_tasks_among
from sas.state_store.rows import TaskRow

# On a Supervisor's first look: how far back a closing is still taken up here (older ones are the
# orphan check's turn).
FIRST_LOOKBACK = timedelta(minutes=10)
# Visibility is eventually consistent: each look starts this far before the last one's time.
_OVERLAP = timedelta(seconds=10)
# Closed from outside, or by a failure of its own: a workflow that completed or continued as new
# did not leave its rows behind.
_CLOSED_SO = "ExecutionStatus IN ('Terminated', 'Failed', 'TimedOut', 'Canceled')"
# Task ids asked of the state store at once.
_CHUNK = 500


class ClosedFollower:
    """Keeps, per Supervisor process, when it last looked and the tasks found but not yet taken."""

    def __init__(self, client: Client, task_queue: str) -> None:
        self._client = client
        self._task_queue = task_queue
        self._since: datetime | None = None
        self._found: dict[str, None] = {}  # an ordered set: the oldest found is taken first

    async def look(self) -> None:
        """Add the workflows closed so since the last look to those waiting to be taken."""
        now = datetime.now(UTC)
        since = (self._since or now - FIRST_LOOKBACK) - _OVERLAP
        query = (
            f"TaskQueue = '{self._task_queue}' AND CloseTime >= '{since.isoformat().replace('+00:00', 'Z')}'"
            f" AND {_CLOSED_SO}"
        )
        async for run in self._client.list_workflows(query):
            self._found.setdefault(run.id, None)
        self._since = now

    async def take(
        self,
        sessions: async_sessionmaker[AsyncSession],
        buckets: tuple[int, int] | None,
        limit: int,
        quiet_before: datetime,
    ) -> list[TaskRow]:
        """Up to ``limit`` of the tasks found that the mirror says are open, in a shard's
        ``buckets`` (all, when None), and quiet (untouched since ``quiet_before``). Ids it does not
        hold as open are dropped; another shard's, those not quiet yet and those beyond ``limit``
        wait (one process may check several shards, each with the same list)."""
        taken: list[TaskRow] = []
        ids = list(self._found)
        for i in range(0, len(ids), _CHUNK):
            if len(taken) >= limit:
                break
            chunk = ids[i : i + _CHUNK]
            async with sessions() as session:
                rows = {t.task_id: t for t in await open_tasks_among(session, chunk)}
            for task_id in chunk:
                row = rows.get(task_id)
                if row is None:
                    del self._found[task_id]
                elif _in(row, buckets) and row.updated_at < quiet_before and len(taken) < limit:
                    del self._found[task_id]
                    taken.append(row)
        return taken


def _in(row: TaskRow, buckets: tuple[int, int] | None) -> bool:
    return buckets is None or buckets[0] <= row.shard < buckets[1]
