"""The Supervisor's look at finished tasks whose steps disagree with them.

A task can finish while a write of one of its steps was lost - the Agent goes on without its
row while the database is away - and nothing else would look at it again: a step left open,
or a step left Processed under a Compensated task when its undo's writes were the lost ones.
Each such task is reconciled as any other (``sas.reconciliation.repairs``), on its own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from sas.reconciliation.repairs import Reconciliation, reconcile_task
from sas.state_store.queries import FINISHED_TASK_STATES, finished_page
from sas.supervisor.per_task import isolated

# Where the look at finished tasks starts when it has no cursor yet (a new Supervisor workflow).
FIRST_LOOKBACK = timedelta(hours=24)
# Finished tasks read per page, and pages per call: the rows are read from an index, and only
# those that disagree cost a question to Temporal.
_PAGE = 500
_PAGES = 10


async def reconcile_finished(
    sessions: async_sessionmaker[AsyncSession],
    client: Client,
    cursor: dict[str, str],
    before: datetime,
    budget: int,
    bucket_range: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Reconcile the tasks that finished since the last call and whose steps disagree with them.

    A cursor per finished state (``cursor["finished:<state>"]``, kept by the Supervisor's
    workflow) moves through the tasks finished before ``before`` (a settling margin, so no
    task commits behind it) in (updated_at, task_id) order. Each such task is read once from
    the index; the few with a step row their state cannot hold are asked of Temporal, at most ``budget``
    of them per call. The first call starts ``FIRST_LOOKBACK`` back. Returns (tasks asked
    of Temporal, rows repaired)."""
    asked = repaired = 0
    for state in FINISHED_TASK_STATES:
        key = f"finished:{state}"
        position = _parse(cursor.get(key)) or (before - FIRST_LOOKBACK, "")
        for _ in range(_PAGES):
            async with sessions() as session:
                page = await finished_page(session, state, position, before, _PAGE, bucket_range)
            out_of_budget = False
            for at, task_id in page.disagreeing:
                if asked >= budget:
                    out_of_budget = True  # the rest of the page waits for the next call
                    break
                asked += 1
                found = await isolated(
                    sessions, task_id, "reconcile", partial(reconcile_task, sessions, client, task_id)
                )
                repaired += len(found.repairs) if isinstance(found, Reconciliation) else 0
                position = (at, task_id)
            if not out_of_budget:
                position = page.last or position
            cursor[key] = f"{position[0].isoformat()}|{position[1]}"
            if out_of_budget or not page.full:
                break
    return asked, repaired


def _parse(raw: str | None) -> tuple[datetime, str] | None:
    if not raw:
        return None
    when, _, task_id = raw.partition("|")
    return datetime.fromisoformat(when), task_id
