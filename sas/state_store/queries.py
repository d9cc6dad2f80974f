"""Reads of the state store: for the CLI, the tests and the Supervisor's scan.

Rows of ``tasks`` and ``steps`` come back typed as ``TaskRow`` and ``StepRow``: read-only to
the type checker, so nothing outside the state store writes them by changing a loaded row
(their one writer is ``sas.state_store.mirror_rules``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, and_, func, or_, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.mirror_tables import Step, Task
from sas.state_store.rows import StepRow, TaskRow
from sas.state_store.tables import Alert, AuditEntry, Decision, TaskArchive
from sas.task_models import StepState, TaskState

# What the Supervisor looks at, and how long past CompleteBy each state may be.
# Failed rows carry, as CompleteBy, the time the Supervisor should next look at them.
_WAITING_FOR_DECISION = (StepState.FAILED, StepState.COMPENSATION_FAILED)
_RUNNING = (StepState.PROCESSING, StepState.COMPENSATING)


@dataclass(frozen=True)
class TaskRecord:
    task: TaskRow
    steps: list[StepRow]


async def get_task(session: AsyncSession, task_id: str, *, for_update: bool = False) -> TaskRecord | None:
    """A task and its steps in plan order; ``for_update`` locks the task row (PostgreSQL) until the
    caller's transaction ends."""
    task = await session.get(Task, task_id, with_for_update=for_update or None)
    if task is None:
        return None
    steps = (await session.scalars(select(Step).where(Step.task_id == task_id).order_by(Step.position))).all()
    return TaskRecord(task=task, steps=list(steps))


async def get_task_row(session: AsyncSession, task_id: str) -> TaskRow | None:
    return await session.get(Task, task_id)


async def get_step(session: AsyncSession, task_id: str, step: str) -> StepRow | None:
    return await session.get(Step, (task_id, step))


def as_dict(row: TaskRow | StepRow) -> dict[str, Any]:
    """A task or step row as plain JSON-able values, by column (a snapshot for the archive)."""
    columns = (Task if isinstance(row, Task) else Step).__table__.columns
    return {c.key: (v.isoformat() if isinstance(v := getattr(row, c.key), datetime) else v) for c in columns}


async def list_tasks(
    session: AsyncSession, state: str | None = None, limit: int = 50, task_types: Sequence[str] | None = None
) -> list[TaskRow]:
    query = select(Task).order_by(Task.updated_at.desc()).limit(limit)
    if state is not None:
        query = query.where(Task.state == state)
    if task_types is not None:
        query = query.where(Task.task_type.in_(task_types))
    return list((await session.scalars(query)).all())


async def list_tasks_ids(session: AsyncSession, states: tuple[str, ...], limit: int) -> list[str]:
    """Ids of the tasks in ``states``, least recently updated first."""
    query = select(Task.task_id).where(Task.state.in_(states)).order_by(Task.updated_at).limit(limit)
    return list((await session.scalars(query)).all())


async def stuck_before_the_mirror(session: AsyncSession, limit: int = 50) -> list[Alert]:
    """Open ``workflow_stuck`` alerts of workflows the mirror has no row for: stuck in workflow
    task failures before their first write (a payload the workers cannot decrypt, code that
    does not match the history at start). The Supervisor raises them from Temporal's
    ``TemporalReportedProblems``; ``sas list`` shows them beside the mirror's tasks."""
    query = (
        select(Alert)
        .where(
            Alert.kind == "workflow_stuck",
            Alert.status.in_(("open", "acked")),
            Alert.task_id.is_not(None),
            ~select(Task.task_id).where(Task.task_id == Alert.task_id).exists(),
        )
        .order_by(Alert.updated_at.desc())
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


def due_steps_query(
    now: datetime, grace: timedelta, limit: int, bucket_range: tuple[int, int] | None = None
) -> Select[Any]:
    """The Supervisor's scan: one index range scan on (state, complete_by) per state,
    each bounded by ``limit``, so its cost does not grow with the table. A shard's
    hash range filters the rows the range scan reads; it does not widen it."""

    def part(state: str, until: datetime) -> Select[Step]:
        query = select(Step).where(Step.state == state, Step.complete_by <= until)
        if bucket_range is not None:
            query = query.where(Step.shard >= bucket_range[0], Step.shard < bucket_range[1])
        return query.order_by(Step.complete_by).limit(limit)

    parts = [part(state, now) for state in _WAITING_FOR_DECISION] + [part(state, now - grace) for state in _RUNNING]
    unioned = union_all(*(p.subquery().select() for p in parts)).subquery()
    return select(Step).from_statement(select(unioned).limit(limit))  # type: ignore[return-value]


def permanent_due_query(now: datetime, limit: int, bucket_range: tuple[int, int] | None = None) -> Select[Any]:
    """Failed steps the service refused for good, due now: decided before the rest of a backlog
    (one refused order must not wait behind a thousand cool-downs of another outage)."""
    query = select(Step).where(Step.state == StepState.FAILED, Step.complete_by <= now, Step.permanent.is_(True))
    if bucket_range is not None:
        query = query.where(Step.shard >= bucket_range[0], Step.shard < bucket_range[1])
    return query.order_by(Step.complete_by).limit(limit)


async def due_steps(
    session: AsyncSession,
    now: datetime,
    grace: timedelta,
    limit: int,
    bucket_range: tuple[int, int] | None = None,
    *,
    refusals_only: bool = False,
) -> list[tuple[StepRow, TaskRow]]:
    """The steps due, permanent failures first (``permanent_due_query``), then the rest
    (``due_steps_query``), at most ``limit``; ``refusals_only``: the permanent failures alone."""
    first = list((await session.scalars(permanent_due_query(now, limit, bucket_range))).all())
    seen = {(s.task_id, s.name) for s in first}
    rest = [] if refusals_only else (await session.scalars(due_steps_query(now, grace, limit, bucket_range))).all()
    steps = (first + [s for s in rest if (s.task_id, s.name) not in seen])[:limit]
    if not steps:
        return []
    tasks = {
        t.task_id: t
        for t in (await session.scalars(select(Task).where(Task.task_id.in_({s.task_id for s in steps})))).all()
    }
    return [(s, tasks[s.task_id]) for s in steps if s.task_id in tasks]


# Tasks whose workflow should be running, as the mirror sees them.
OPEN_TASK_STATES = (TaskState.PENDING, TaskState.PROCESSING, TaskState.FAILED, TaskState.COMPENSATING, TaskState.ERROR)


def stale_tasks_query(
    state: str,
    before: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
    bucket_range: tuple[int, int] | None = None,
) -> Select[Any]:
    """Tasks in ``state`` not updated since ``before``, in (updated_at, task_id) order after
    ``after``: a range scan of the (state, updated_at) index that resumes where the
    last one stopped, so every stale task gets its turn however many there are."""
    query = select(Task).where(Task.state == state, Task.updated_at < before)
    if after is not None:
        query = query.where(tuple_(Task.updated_at, Task.task_id) > tuple_(after[0], after[1]))
    if bucket_range is not None:
        query = query.where(Task.shard >= bucket_range[0], Task.shard < bucket_range[1])
    return query.order_by(Task.updated_at, Task.task_id).limit(limit)


async def stale_tasks(
    session: AsyncSession,
    state: str,
    before: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
    bucket_range: tuple[int, int] | None = None,
) -> list[TaskRow]:
    return list((await session.scalars(stale_tasks_query(state, before, limit, after, bucket_range))).all())


# Finished by their workflow. A step row in a state its finished task cannot hold disagrees with
# it: a write was lost while the database was away (the Agent went on without its row) and the
# task's own last write landed. A step still open (as a chaos run found), or, under a
# Compensated task, a step still Processed: its undo's writes were the lost ones.
FINISHED_TASK_STATES = (TaskState.PROCESSED, TaskState.COMPENSATED)
OPEN_STEP_STATES = (
    StepState.PENDING,
    StepState.PROCESSING,
    StepState.FAILED,
    StepState.COMPENSATING,
    StepState.COMPENSATION_FAILED,
    StepState.WAITING,
)
DISAGREEING_STEP_STATES: dict[str, tuple[StepState, ...]] = {
    TaskState.PROCESSED: OPEN_STEP_STATES,
    TaskState.COMPENSATED: (*OPEN_STEP_STATES, StepState.PROCESSED),
}


@dataclass(frozen=True)
class FinishedPage:
    """One page of finished tasks: those whose steps disagree with them, and where the page ended."""

    disagreeing: list[tuple[datetime, str]]  # (updated_at, task_id), in page order
    last: tuple[datetime, str] | None  # None: no task in the range
    full: bool  # the page was full: more may follow


async def finished_page(
    session: AsyncSession,
    state: str,
    after: tuple[datetime, str],
    before: datetime,
    limit: int,
    bucket_range: tuple[int, int] | None = None,
) -> FinishedPage:
    """The next ``limit`` tasks finished in ``state`` after ``after`` and before ``before``, in
    (updated_at, task_id) order - a range scan of the (state, updated_at) index - and which of
    them has a step in an open state (their steps by primary key). Each finished task is
    looked at once as a cursor moves past it, so the cost follows the rate tasks finish at,
    not the size of the history."""
    query = select(Task.updated_at, Task.task_id).where(
        Task.state == state,
        Task.updated_at < before,
        tuple_(Task.updated_at, Task.task_id) > tuple_(after[0], after[1]),
    )
    if bucket_range is not None:
        query = query.where(Task.shard >= bucket_range[0], Task.shard < bucket_range[1])
    rows = [
        (at, task_id)
        for at, task_id in (await session.execute(query.order_by(Task.updated_at, Task.task_id).limit(limit))).all()
    ]
    if not rows:
        return FinishedPage([], None, False)
    disagreeing = select(Step.task_id).where(
        Step.task_id.in_([task_id for _, task_id in rows]), Step.state.in_(DISAGREEING_STEP_STATES[state])
    )
    stale = set((await session.scalars(disagreeing.distinct())).all())
    return FinishedPage([r for r in rows if r[1] in stale], rows[-1], len(rows) == limit)


async def finished_disagreeing(session: AsyncSession, limit: int) -> list[str]:
    """Finished tasks with a step row their state cannot hold (DISAGREEING_STEP_STATES), for
    ``sas reconcile``."""
    disagrees = or_(
        *(and_(Task.state == task, Step.state.in_(steps)) for task, steps in DISAGREEING_STEP_STATES.items())
    )
    query = select(Step.task_id).join(Task, Task.task_id == Step.task_id).where(disagrees).distinct().limit(limit)
    return list((await session.scalars(query)).all())


async def waiting_tasks_by_queue(session: AsyncSession, before: datetime, limit: int = 1000) -> dict[str, int]:
    """Tasks with a Pending or Processing step not touched since ``before``, counted per task queue.

    Reads the (state, complete_by) index ranges of those two states only (in-flight
    work, not the history), at most ``limit`` rows each."""
    parts = [
        select(Step.task_id).where(Step.state == state, Step.updated_at < before).limit(limit).subquery().select()
        for state in (StepState.PENDING, StepState.PROCESSING)
    ]
    inner = union_all(*parts).subquery()
    rows = await session.execute(
        select(Task.task_queue, func.count(func.distinct(inner.c.task_id)))
        .join(inner, inner.c.task_id == Task.task_id)
        .where(Task.state.in_((TaskState.PENDING, TaskState.PROCESSING)))
        .group_by(Task.task_queue)
    )
    return {queue: int(n) for queue, n in rows.all()}


def tasks_in_buckets(buckets: tuple[int, int]) -> Select[Any]:
    """The ids of the tasks in a shard's hash range, as a subquery for another table's reads."""
    return select(Task.task_id).where(Task.shard >= buckets[0], Task.shard < buckets[1])


async def runs_of(
    session: AsyncSession, task_ids: list[str], buckets: tuple[int, int] | None = None
) -> dict[str, tuple[str | None, str | None]]:
    """The run and chain the mirror records for each of ``task_ids`` it has (in a shard's
    ``buckets``, when given): task id -> (run id, chain id)."""
    query = select(Task.task_id, Task.run_id, Task.chain_id).where(Task.task_id.in_(task_ids))
    if buckets is not None:
        query = query.where(Task.shard >= buckets[0], Task.shard < buckets[1])
    return {task_id: (run_id, chain_id) for task_id, run_id, chain_id in (await session.execute(query)).all()}


async def open_tasks_among(session: AsyncSession, task_ids: list[str]) -> list[TaskRow]:
    """Those of ``task_ids`` the mirror holds as open (``OPEN_TASK_STATES``): by the tasks'
    primary key, whatever their number."""
    query = select(Task).where(Task.task_id.in_(task_ids), Task.state.in_(OPEN_TASK_STATES))
    return list((await session.scalars(query)).all())


async def step_counts(session: AsyncSession) -> dict[str, int]:
    """Step rows by state."""
    rows = await session.execute(select(Step.state, func.count()).group_by(Step.state))
    return {state: int(n) for state, n in rows.all()}


async def overdue_steps(session: AsyncSession, states: tuple[str, ...], cutoff: datetime) -> int:
    """Steps in ``states`` whose CompleteBy passed before ``cutoff``."""
    query = select(func.count()).select_from(Step).where(Step.state.in_(states), Step.complete_by < cutoff)
    return int(await session.scalar(query) or 0)


async def children_of(session: AsyncSession, task_id: str) -> list[TaskRow]:
    """The tasks that ``task_id``'s child steps started (``tasks.parent_task_id``), oldest first."""
    query = select(Task).where(Task.parent_task_id == task_id).order_by(Task.created_at, Task.task_id)
    return list((await session.scalars(query)).all())


async def decisions_for(session: AsyncSession, task_id: str) -> list[Decision]:
    return list(
        (await session.scalars(select(Decision).where(Decision.task_id == task_id).order_by(Decision.id))).all()
    )


async def alerts_for(session: AsyncSession, task_id: str) -> list[Alert]:
    return list((await session.scalars(select(Alert).where(Alert.task_id == task_id).order_by(Alert.id))).all())


async def audit_for(session: AsyncSession, task_id: str) -> list[AuditEntry]:
    query = select(AuditEntry).where(AuditEntry.task_id == task_id).order_by(AuditEntry.seq)
    return list((await session.scalars(query)).all())


async def failure_counts(session: AsyncSession, task_ids: list[str]) -> dict[str, int]:
    """Highest FailureCount among each task's steps (the dead letter's attempt count)."""
    if not task_ids:
        return {}
    query = select(Step.task_id, func.max(Step.failure_count)).where(Step.task_id.in_(task_ids)).group_by(Step.task_id)
    return {task_id: int(count or 0) for task_id, count in (await session.execute(query)).all()}


async def archived_incarnations(session: AsyncSession, task_id: str) -> list[TaskArchive]:
    """The finished incarnations of a task that `sas resubmit` replaced, oldest first."""
    query = select(TaskArchive).where(TaskArchive.task_id == task_id).order_by(TaskArchive.incarnation)
    return list((await session.scalars(query)).all())
