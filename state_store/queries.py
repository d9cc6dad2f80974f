"""Reads of the state store: for the CLI, the tests and the Supervisor's scan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from state_store.tables import Alert, Decision, Step, Task
from task_models import StepState

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


def due_steps_query(now: datetime, grace: timedelta, limit: int) -> Select[tuple[Step]]:
    """The Supervisor's scan: one index range scan on (state, complete_by) per state,
    each bounded by ``limit``, so its cost does not grow with the table."""
    parts = [
        select(Step).where(Step.state == state, Step.complete_by <= now).order_by(Step.complete_by).limit(limit)
        for state in _WAITING_FOR_DECISION
    ] + [
        select(Step).where(Step.state == state, Step.complete_by <= now - grace).order_by(Step.complete_by).limit(limit)
        for state in _RUNNING
    ]
    unioned = union_all(*(p.subquery().select() for p in parts)).subquery()
    return select(Step).from_statement(select(unioned).limit(limit))  # type: ignore[return-value]


async def due_steps(session: AsyncSession, now: datetime, grace: timedelta, limit: int) -> list[tuple[Step, Task]]:
    steps = list((await session.scalars(due_steps_query(now, grace, limit))).all())
    if not steps:
        return []
    tasks = {
        t.task_id: t
        for t in (await session.scalars(select(Task).where(Task.task_id.in_({s.task_id for s in steps})))).all()
    }
    return [(s, tasks[s.task_id]) for s in steps if s.task_id in tasks]


async def decisions_for(session: AsyncSession, task_id: str) -> list[Decision]:
    return list(
        (await session.scalars(select(Decision).where(Decision.task_id == task_id).order_by(Decision.id))).all()
    )


async def alerts_for(session: AsyncSession, task_id: str) -> list[Alert]:
    return list((await session.scalars(select(Alert).where(Alert.task_id == task_id).order_by(Alert.id))).all())
