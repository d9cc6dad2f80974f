"""Which tasks a bulk operator action picks from the state store (`sas retry --state error --step charge`).

Reads only: the mirror says which tasks *look* parked, failed or undone; the CLI then asks
Temporal about each one before it acts (the mirror follows Temporal, never leads it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Select, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.mirror_tables import Step, Task


@dataclass(frozen=True)
class TaskFilter:
    """What to select; every set field must hold. At least one must be set (see ``is_empty``).

    Attributes:
        task_states: The task is in one of these states (``tasks.state``).
        step_states: Or its current step is in one of these (a step-only state: CompensationFailed).
        step: The task is at this step (``tasks.current_step``).
        since: The task's row changed at or after this time (parked in the last hour).
        task_type: The task is of this type.
    """

    task_states: tuple[str, ...] = ()
    step_states: tuple[str, ...] = ()
    step: str | None = None
    since: datetime | None = None
    task_type: str | None = None

    def is_empty(self) -> bool:
        """True when nothing narrows the selection: it would be every task ever."""
        return not (self.task_states or self.step_states or self.step or self.since or self.task_type)


@dataclass(frozen=True)
class SelectedTask:
    """A selected task as the mirror shows it, and what Temporal must be asked about."""

    task_id: str
    task_type: str
    state: str
    step: str | None
    step_state: str | None
    last_error: str | None
    chain_id: str | None
    run_id: str | None
    updated_at: datetime


def _query(where: Sequence[ColumnElement[bool]], limit: int) -> Select[Task, str, str | None]:
    current = and_(Step.task_id == Task.task_id, Step.name == Task.current_step)
    return (
        select(Task, Step.state, Step.last_error)
        .outerjoin(Step, current)
        .where(*where)
        .order_by(Task.updated_at, Task.task_id)
        .limit(limit)
    )


def _selected(task: Task, step_state: str | None, last_error: str | None) -> SelectedTask:
    return SelectedTask(
        task_id=task.task_id,
        task_type=task.task_type,
        state=task.state,
        step=task.current_step,
        step_state=step_state,
        last_error=last_error,
        chain_id=task.chain_id,
        run_id=task.run_id,
        updated_at=task.updated_at,
    )


async def select_tasks(session: AsyncSession, wanted: TaskFilter, limit: int) -> list[SelectedTask]:
    """Tasks matching ``wanted``, oldest change first, at most ``limit`` (ask for one more than
    you will act on to learn whether the bound cut the selection short)."""
    if wanted.is_empty():
        raise ValueError("an empty filter would select every task")
    where: list[ColumnElement[bool]] = []
    states: list[ColumnElement[bool]] = []
    if wanted.task_states:
        states.append(Task.state.in_(wanted.task_states))
    if wanted.step_states:
        states.append(Step.state.in_(wanted.step_states))
    if states:
        where.append(or_(*states))
    if wanted.step is not None:
        where.append(Task.current_step == wanted.step)
    if wanted.since is not None:
        where.append(Task.updated_at >= wanted.since)
    if wanted.task_type is not None:
        where.append(Task.task_type == wanted.task_type)
    rows = await session.execute(_query(where, limit))
    return [_selected(task, step_state, last_error) for task, step_state, last_error in rows.all()]


async def tasks_by_id(session: AsyncSession, task_ids: Sequence[str]) -> dict[str, SelectedTask]:
    """The mirror's rows of tasks chosen elsewhere (a Temporal visibility query), by id."""
    if not task_ids:
        return {}
    rows = await session.execute(_query([Task.task_id.in_(list(task_ids))], len(task_ids)))
    return {task.task_id: _selected(task, step_state, last_error) for task, step_state, last_error in rows.all()}
