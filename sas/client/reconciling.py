"""``TaskClient.reconcile``: the mirror brought in line with Temporal on demand, for one task or
for every task the mirror says is unfinished, by the Supervisor's own reconciliation
(``sas.reconciliation.repairs``): repairs are audited, nothing is undone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sas.client.errors import InvalidInput

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
    from temporalio.client import Client

    from sas.client.store import StateStore

MAX_TASKS = 10_000
# What a look that outlasted this is called (the status query's own timeout).
_QUERY_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ReconciledTask:
    """One task looked at: ``temporal`` what Temporal says of it in words (or why it was not
    reconciled), ``repairs`` each row repaired (or, in a dry run, that would be)."""

    task_id: str
    temporal: str
    repairs: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        """The task as ``sas reconcile --json`` prints it."""
        return {"task_id": self.task_id, "temporal": self.temporal, "repairs": self.repairs}


@dataclass(frozen=True)
class Reconciled:
    """What ``TaskClient.reconcile`` did: each task looked at, in order; ``dry_run`` when
    nothing was changed."""

    dry_run: bool
    tasks: list[ReconciledTask]

    @property
    def repaired(self) -> int:
        """The rows repaired (or that would be) over every task."""
        return sum(len(t.repairs) for t in self.tasks)


def check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_TASKS:
        raise InvalidInput(f"limit {limit}: must be 1 to {MAX_TASKS}", field="limit")


async def reconcile(
    temporal: Client, store: StateStore, task_id: str | None, *, dry_run: bool, limit: int
) -> Reconciled:
    """Reconcile ``task_id``, or the unfinished tasks (at most ``limit``, oldest change first)
    and then the finished ones whose steps disagree with them."""
    from sas.reconciliation.repairs import open_task_ids

    async def go(sessions: async_sessionmaker[AsyncSession]) -> list[ReconciledTask]:
        ids = [task_id] if task_id is not None else await open_task_ids(sessions, limit)
        return [await _one(sessions, temporal, one, dry_run) for one in ids]

    return Reconciled(dry_run, await store.sessions(go))


async def _one(
    sessions: async_sessionmaker[AsyncSession], temporal: Client, task_id: str, dry_run: bool
) -> ReconciledTask:
    from sas.reconciliation.repairs import reconcile_task
    from sas.runtime.task_faults import task_fault

    try:
        result = await reconcile_task(sessions, temporal, task_id, dry_run=dry_run)
    except Exception as err:
        # One task that cannot be looked at (its type no longer registered, a status too large
        # to answer) says so on its own line; the others are reconciled.
        fault = task_fault(err, _QUERY_TIMEOUT_S)
        if fault is None:
            raise
        return ReconciledTask(task_id, f"not reconciled: {fault.cause}")
    if result is None:
        return ReconciledTask(task_id, "no such task in the state store")
    repairs = [r.describe().removeprefix(f"{task_id} ") for r in result.repairs]
    return ReconciledTask(task_id, result.temporal, repairs)
