"""Reconciling the mirror with Temporal: the mirror follows Temporal, never leads it.

A row can drift from its workflow - an Agent's write lost in a database outage, a row
edited by hand, a workflow reset. Reconciling compares a task's open rows with
Temporal's state of its workflow (describe; the result of a finished one; the ``status``
query of a running one) and repairs rows that Temporal shows *done*, with an audit
entry and never with compensation. The Supervisor does it for quiet open tasks
periodically and for every task it was about to act on; ``sas reconcile`` does it on
demand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError

from sas.state_store.queries import OPEN_TASK_STATES, get_task
from sas.state_store.rejections import alert_refused_write, refused_for_good
from sas.state_store.tables import AuditEntry, Step, Task
from sas.supervisor.temporal_view import TemporalView, look
from sas.task_models import StepState, TaskResult, TaskStatus

# Step states Temporal can show as settled; a row that is open while Temporal shows one of these is stale.
_DONE = (StepState.PROCESSED, StepState.COMPENSATED, StepState.SKIPPED)
_OPEN_STEP = ("Pending", "Processing", "Failed", "Compensating", "CompensationFailed")
_AUDIT_RUN = "reconcile"


@dataclass
class Repair:
    """One row brought in line with Temporal."""

    task_id: str
    step: str | None  # None: the task row
    before: str
    after: str
    seen_version: int

    def describe(self) -> str:
        what = f"{self.task_id} {self.step}" if self.step else f"{self.task_id} (task)"
        return f"{what}: {self.before} -> {self.after}"


@dataclass
class Reconciliation:
    task_id: str
    temporal: str  # what Temporal says, in words
    repairs: list[Repair]


async def reconcile_task(
    sessions: async_sessionmaker[AsyncSession], client: Client, task_id: str, *, dry_run: bool = False
) -> Reconciliation | None:
    """Compare one task's rows with Temporal and (unless ``dry_run``) repair the stale ones.
    None if the mirror has no such task."""
    async with sessions() as session:
        record = await get_task(session, task_id)
    if record is None:
        return None
    view = await look(client, task_id, record.task.chain_id, record.task.run_id)
    truth = await _truth(client, task_id, view)
    repairs: list[Repair] = []
    if truth is not None:
        settled = {s.name: s.state for s in truth.steps}
        for row in record.steps:
            after = settled.get(row.name)
            if after in _DONE and row.state in _OPEN_STEP and row.state != after:
                repairs.append(Repair(task_id, row.name, row.state, str(after), row.version))
        if view.status == "completed" and record.task.state != truth.state:
            repairs.append(Repair(task_id, None, record.task.state, str(truth.state), record.task.version))
    if repairs and not dry_run:
        try:
            repairs = await _apply(sessions, repairs, view)
        except Exception as err:
            if not refused_for_good(err):
                raise
            # The row can't take what Temporal says (the same refusal the Agent met): one alert,
            # no repair, and the sweep goes on with the other tasks instead of failing for ever.
            async with sessions() as session:
                await alert_refused_write(session, task_id, repairs[0].step, "reconcile", err, datetime.now(UTC))
            repairs = []
    return Reconciliation(task_id, view.how or view.status, repairs)


async def _truth(client: Client, task_id: str, view: TemporalView) -> TaskResult | TaskStatus | None:
    """The step states Temporal holds: a finished workflow's result, a running one's ``status``
    query (which needs a worker: no answer, no repair)."""
    handle = client.get_workflow_handle(task_id, run_id=view.run_id, result_type=TaskResult)
    try:
        if view.status == "completed":
            return await handle.result(follow_runs=False)
        if view.status == "running":
            return await handle.query("status", result_type=TaskStatus, rpc_timeout=timedelta(seconds=5))
    except RPCError:
        return None
    return None


async def _apply(sessions: async_sessionmaker[AsyncSession], repairs: list[Repair], view: TemporalView) -> list[Repair]:
    """Write each repair if its row is still as it was read (compare-and-set on the version),
    with an audit entry; returns those written. The new version is one above the row's, so
    any later write of the workflow still wins."""
    now = datetime.now(UTC)
    done: list[Repair] = []
    async with sessions() as session, session.begin():
        for r in repairs:
            if r.step is None:
                query = update(Task).where(Task.task_id == r.task_id, Task.version == r.seen_version)
                values: dict[str, object] = {"state": r.after, "version": r.seen_version + 1, "updated_at": now}
            else:
                query = update(Step).where(
                    Step.task_id == r.task_id, Step.name == r.step, Step.version == r.seen_version
                )
                values = {
                    "state": r.after,
                    "version": r.seen_version + 1,
                    "updated_at": now,
                    "complete_by": None,
                    "locked_by": None,
                }
            written = cast("CursorResult[Any]", await session.execute(query.values(**values)))
            if written.rowcount:
                done.append(r)
        if done:
            await _audit(session, done, view, now)
    return done


async def _audit(session: AsyncSession, done: list[Repair], view: TemporalView, now: datetime) -> None:
    task_id = done[0].task_id
    count = await session.scalar(
        select(func.count())
        .select_from(AuditEntry)
        .where(AuditEntry.task_id == task_id, AuditEntry.run_id == _AUDIT_RUN)
    )
    try:
        async with session.begin_nested():
            session.add(
                AuditEntry(
                    task_id=task_id,
                    run_id=_AUDIT_RUN,
                    seq=int(count or 0) + 1,
                    step=done[0].step if len(done) == 1 else None,
                    action="reconcile",
                    actor="supervisor",
                    reason=f"the mirror was behind Temporal (workflow {view.how or view.status})",
                    changed="; ".join(r.describe().removeprefix(f"{task_id} ") for r in done),
                    at=now,
                )
            )
    except IntegrityError:
        pass  # another Supervisor recorded the same repair


async def open_task_ids(sessions: async_sessionmaker[AsyncSession], limit: int) -> list[str]:
    """Tasks the mirror says are unfinished, oldest update first (for ``sas reconcile`` with no id)."""
    async with sessions() as session:
        rows = await session.scalars(
            select(Task.task_id).where(Task.state.in_(OPEN_TASK_STATES)).order_by(Task.updated_at).limit(limit)
        )
        return list(rows.all())
