"""One task's rows brought in line with Temporal: the mirror follows Temporal, never leads it.

A row can drift from its workflow - an Agent's write lost in a database outage, a row
edited by hand, a workflow reset. Reconciling compares every step row of a task with
Temporal's state of its workflow (describe; the result of a finished one; the ``status``
query of a running one) and repairs rows that Temporal shows *done*, with an audit
entry and never with compensation, through the one writer (``sas.state_store.mirror``). It
also follows the newest run of the task's chain: a reset run that wrote nothing new (a
reset to the last workflow task of a finished workflow replays the old run's writes, whose
versions the rows already hold) is recorded as the task's run, audited, and nothing else
changes.

The Supervisor runs it for quiet open tasks, for every task it was about to act on, and for
finished tasks whose steps disagree with them (``sas.supervisor.detect.finished``); ``sas reconcile``
(``TaskClient.reconcile``) runs it on demand. It sits below both, so both run this one copy.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sas.reconciliation.foreign_results import alert_foreign_result, completed_from_outside, foreign_note
from sas.reconciliation.temporal_view import TemporalView, look
from sas.state_store import mirror
from sas.state_store.queries import (
    OPEN_STEP_STATES,
    OPEN_TASK_STATES,
    TaskRecord,
    finished_disagreeing,
    get_task,
    list_tasks_ids,
)
from sas.state_store.rejections import alert_refused_write, refused_for_good
from sas.state_store.tables import AuditEntry
from sas.task_models import StepState, StepStatus, TaskResult, TaskState, TaskStatus

# Step states Temporal can show as settled; a row behind one of these (``_behind``) is stale.
_DONE = (StepState.PROCESSED, StepState.COMPENSATED, StepState.SKIPPED)
_AUDIT_RUN = "reconcile"
# One attempt's bound and the whole query's: the client retries a query the server let run to
# its deadline (no worker took it), and those retries must not eat the task's own bound
# (``sas.supervisor.per_task.TASK_TIMEOUT_S``), which would call a worker outage the task's fault.
_QUERY_TIMEOUT = timedelta(seconds=4)
# No worker polls the queue (Temporal answers a query then with FAILED_PRECONDITION, "no poller
# seen"), none answered in time, or Temporal is away: no answer, so no repair (the queue check
# alerts on a queue nobody polls); the next look asks again.
_NO_ANSWER = (
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.CANCELLED,
)


@dataclass
class Repair:
    """One row brought in line with Temporal."""

    task_id: str
    step: str | None  # None: the task row
    before: str
    after: str
    seen_version: int
    temporal: StepStatus | None = field(default=None, repr=False)  # what Temporal shows of the step
    # "state": the row's state (and what comes with it); "run": the run that owns the task
    # (``before``/``after`` are run ids, ``step`` is None).
    subject: Literal["state", "run"] = "state"
    # Who completed the step's activity, when that was not the worker that ran it (a result sas
    # did not produce: ``sas.reconciliation.foreign_results``).
    foreign: str | None = None
    activity: str = ""  # the step's Agent

    def describe(self) -> str:
        what = f"{self.task_id} {self.step}" if self.step else f"{self.task_id} (task)"
        if self.subject == "run":
            what = f"{self.task_id} run"
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
        settled = {s.name: s for s in truth.steps}
        for row in record.steps:
            shown = settled.get(row.name)
            if shown is not None and shown.state in _DONE and _behind(row.state, shown.state):
                repair = Repair(task_id, row.name, row.state, str(shown.state), row.version, shown)
                if shown.state == StepState.PROCESSED and row.state in OPEN_STEP_STATES:
                    # Its Agent never recorded it done: the answer may not be the Agent's.
                    repair.activity = row.agent
                    repair.foreign = await completed_from_outside(client, task_id, view.run_id, row.agent)
                repairs.append(repair)
        if view.status == "completed" and record.task.state != truth.state and not undone_after(record, truth):
            repairs.append(Repair(task_id, None, record.task.state, str(truth.state), record.task.version))
    newer_run = _newer_run_of_chain(record.task.chain_id, record.task.run_id, view)
    if newer_run is not None and not (truth is not None and undone_after(record, truth)):
        repairs.append(Repair(task_id, None, str(record.task.run_id), newer_run, record.task.version, subject="run"))
    if repairs and not dry_run:
        try:
            repairs = await _apply(sessions, repairs, view)
            for r in repairs:
                if r.foreign and r.step is not None:
                    await alert_foreign_result(sessions, task_id, r.step, r.activity, r.foreign, datetime.now(UTC))
        except Exception as err:
            if not refused_for_good(err):
                raise
            # The row can't take what Temporal says (the same refusal the Agent met): one alert,
            # no repair, and the sweep goes on with the other tasks instead of failing for ever.
            async with sessions() as session:
                await alert_refused_write(session, task_id, repairs[0].step, "reconcile", err, datetime.now(UTC))
            repairs = []
    return Reconciliation(task_id, view.how or view.status, repairs)


def _behind(row: str, shown: StepState) -> bool:
    """Whether a step row is behind what Temporal shows done: still open, or still Processed where
    Temporal shows its undo done (the undo's writes were lost; the step only ever moves on from
    Processed to Compensated, never back)."""
    return row in OPEN_STEP_STATES or (row == StepState.PROCESSED and shown == StepState.COMPENSATED)


def undone_after(record: TaskRecord, truth: TaskResult | TaskStatus) -> bool:
    """Whether the task was undone after its workflow completed: a child task its parent undid
    is undone by a clean-up of its own (``cleanup-<id>``), which records its run on the row and
    which the child's workflow result never shows. Such a row is ahead of that result, not behind
    it: neither its state nor its run is taken back (a task only moves on from Processed to
    Compensated, never back)."""
    return record.task.state == TaskState.COMPENSATED and truth.state == TaskState.PROCESSED


def _newer_run_of_chain(chain_id: str | None, run_id: str | None, view: TemporalView) -> str | None:
    """The newest run of the task's chain, if it is not the run the mirror records. Only a
    recorded chain proves a run is the task's own (a reuse of the id starts a chain of its
    own); ``look`` describes the newest run when it is of the chain. A run that ended otherwise
    than complete is not adopted: a task whose workflow died is the clean-up's (which records
    its own run), and a reset's new run is running or completed."""
    if chain_id is None or run_id is None or view.run_id is None or view.first_run_id != chain_id:
        return None
    if view.status not in ("running", "completed"):
        return None
    return view.run_id if view.run_id != run_id else None


async def _truth(client: Client, task_id: str, view: TemporalView) -> TaskResult | TaskStatus | None:
    """The step states Temporal holds: a finished workflow's result, a running one's ``status``
    query (which needs a worker: no answer, no repair). A query that fails otherwise (its type
    registered on no worker, an answer too large) is raised: the task's fault, not the sweep's."""
    handle = client.get_workflow_handle(task_id, run_id=view.run_id, result_type=TaskResult)
    try:
        if view.status == "completed":
            return await handle.result(follow_runs=False)
        if view.status == "running":
            async with asyncio.timeout(_QUERY_TIMEOUT.total_seconds()):
                return await handle.query("status", result_type=TaskStatus, rpc_timeout=_QUERY_TIMEOUT)
    except TimeoutError:
        return None  # no worker answered in time: the same as DEADLINE_EXCEEDED
    except RPCError as err:
        if err.status in _NO_ANSWER:
            return None
        raise  # the task's own fault (``sas.runtime.task_faults``): its caller alerts and goes on
    return None


async def _apply(sessions: async_sessionmaker[AsyncSession], repairs: list[Repair], view: TemporalView) -> list[Repair]:
    """Write each repair if its row is still as it was read (compare-and-set on the version),
    with an audit entry; returns those written. The new version is above the row's
    (``mirror.repair_version``), so any later write of the workflow still wins."""
    now = datetime.now(UTC)
    finished = view.status == "completed"
    done: list[Repair] = []
    async with sessions() as session, session.begin():
        for r in repairs:
            version = mirror.repair_version(r.seen_version, now, finished)
            if r.subject == "run":
                assert view.first_run_id is not None, "a run is adopted only from its chain"
                written = await mirror.adopt_run(session, r.task_id, view.first_run_id, r.before, r.after)
            elif r.step is None:
                written = await mirror.repair_task(session, r.task_id, r.seen_version, version, r.after, now)
            else:
                shown = r.temporal
                written = await mirror.repair_step(
                    session,
                    r.task_id,
                    r.step,
                    r.seen_version,
                    version,
                    r.after,
                    now,
                    failure_count=shown.failure_count if shown else None,
                    result=shown.result if shown else None,
                    note=foreign_note(r.activity, r.foreign) if r.foreign else (shown.note if shown else None),
                )
            if written:
                done.append(r)
        if done:
            await _audit(session, done, view, now)
    return done


def _why(done: list[Repair], view: TemporalView) -> str:
    foreign = [r for r in done if r.foreign]
    if foreign:
        return "; ".join(f"{r.step}: {foreign_note(r.activity, r.foreign or '')}" for r in foreign)
    return f"the mirror was behind Temporal (workflow {view.how or view.status})"


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
                    reason=_why(done, view),
                    changed="; ".join(r.describe().removeprefix(f"{task_id} ") for r in done),
                    at=now,
                )
            )
    except IntegrityError:
        pass  # another Supervisor recorded the same repair


async def open_task_ids(sessions: async_sessionmaker[AsyncSession], limit: int) -> list[str]:
    """Tasks the mirror says are unfinished, oldest update first, then finished tasks with a step
    row their state cannot hold (for ``sas reconcile`` with no id)."""
    async with sessions() as session:
        ids = await list_tasks_ids(session, OPEN_TASK_STATES, limit)
        if len(ids) < limit:
            ids += [t for t in await finished_disagreeing(session, limit - len(ids)) if t not in ids]
        return ids
