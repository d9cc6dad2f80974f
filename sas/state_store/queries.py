"""Reads of the state store: for the CLI, the tests and the Supervisor's scan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, func, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.tables import Alert, AuditEntry, Decision, Step, Task, TaskArchive
from sas.task_models import StepState

# What the Supervisor looks at, and how long past CompleteBy each state may be.
# Failed rows carry, as CompleteBy, the time the Supervisor should next look at them.
_WAITING_FOR_DECISION = (StepState.FAILED, StepState.COMPENSATION_FAILED)
_RUNNING = (StepState.PROCESSING, StepState.COMPENSATING)


@dataclass(frozen=True)
class TaskRecord:
    task: Task
    steps: list[Step]


async def get_task(session: AsyncSession, task_id: str) -> TaskRecord | None:
    task = await session.get(Task, task_id)
    if task is None:
        return None
    steps = (await session.scalars(select(Step).where(Step.task_id == task_id).order_by(Step.position))).all()
    return TaskRecord(task=task, steps=list(steps))


async def list_tasks(session: AsyncSession, state: str | None = None, limit: int = 50) -> list[Task]:
    query = select(Task).order_by(Task.updated_at.desc()).limit(limit)
    if state is not None:
        query = query.where(Task.state == state)
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
) -> Select[Step]:
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


async def due_steps(
    session: AsyncSession, now: datetime, grace: timedelta, limit: int, bucket_range: tuple[int, int] | None = None
) -> list[tuple[Step, Task]]:
    steps = list((await session.scalars(due_steps_query(now, grace, limit, bucket_range))).all())
    if not steps:
        return []
    tasks = {
        t.task_id: t
        for t in (await session.scalars(select(Task).where(Task.task_id.in_({s.task_id for s in steps})))).all()
    }
    return [(s, tasks[s.task_id]) for s in steps if s.task_id in tasks]


# Tasks whose workflow should be running, as the mirror sees them.
OPEN_TASK_STATES = ("Pending", "Processing", "Failed", "Compensating", "Error")


def stale_tasks_query(
    state: str,
    before: datetime,
    limit: int,
    after: tuple[datetime, str] | None = None,
    bucket_range: tuple[int, int] | None = None,
) -> Select[Task]:
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
) -> list[Task]:
    return list((await session.scalars(stale_tasks_query(state, before, limit, after, bucket_range))).all())


async def waiting_tasks_by_queue(session: AsyncSession, before: datetime, limit: int = 1000) -> dict[str, int]:
    """Tasks with a Pending or Processing step not touched since ``before``, counted per task queue.

    Reads the (state, complete_by) index ranges of those two states only (in-flight
    work, not the history), at most ``limit`` rows each."""
    parts = [
        select(Step.task_id).where(Step.state == state, Step.updated_at < before).limit(limit).subquery().select()
        for state in ("Pending", "Processing")
    ]
    inner = union_all(*parts).subquery()
    rows = await session.execute(
        select(Task.task_queue, func.count(func.distinct(inner.c.task_id)))
        .join(inner, inner.c.task_id == Task.task_id)
        .where(Task.state.in_(("Pending", "Processing")))
        .group_by(Task.task_queue)
    )
    return {queue: int(n) for queue, n in rows.all()}


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
