"""Writes that mirror the Scheduler's state into the state store.

With ``state_store.agent_writes`` (acceptance and the Agents' own writes, on the
driver directly), these are the only places a step's recorded state changes (the
Supervisor only raises FailureCount and moves CompleteBy, in ``state_store.decisions``). Every write
is idempotent and ordered by version (see ``task_models.versions``).
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, case, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.tables import AuditEntry, Step, Task
from sas.task_models import AuditRecord, StepState, StepTransition


async def record_transitions(session: AsyncSession, transitions: list[StepTransition]) -> int:
    """Apply transitions in one transaction; returns how many step rows changed.

    A transition older than (or equal to) what a row already holds is skipped, so
    retries and replays leave the same row and late writes never win.
    """
    changed = 0
    async with session.begin():
        for t in transitions:
            changed += await _apply(session, t)
    return changed


async def _apply(session: AsyncSession, t: StepTransition) -> int:
    values: dict[str, object] = {
        "state": t.state,
        "version": t.version,
        "updated_at": t.at,
        "locked_by": t.locked_by,
        "complete_by": t.complete_by,
    }
    if t.attempt is not None:
        values["attempt"] = t.attempt
    if t.run_id is not None:
        values["run_id"] = t.run_id
    if t.reset_failure_count and t.failure_count is not None:
        values["failure_count"] = t.failure_count
        values["resets"] = Step.resets + 1
    elif t.failure_count is not None:
        # The Supervisor may have counted further than the Scheduler knows yet.
        values["failure_count"] = case(
            (Step.failure_count < t.failure_count, t.failure_count), else_=Step.failure_count
        )
    # A step that went through clears its last error; an undone one keeps it (see agent_writes).
    if t.last_error is not None or t.state == StepState.PROCESSED:
        values["last_error"] = t.last_error
        values["error_type"] = t.error_type
    if t.permanent is not None:
        values["permanent"] = t.permanent
    if t.result is not None:
        values["result"] = t.result
    # Only the task's own chain of runs writes its rows (see tables.Task.chain_id).
    result = await session.execute(
        update(Step)
        .where(Step.task_id == t.task_id, Step.name == t.step, Step.version < t.version)
        .where(or_(Step.chain_id.is_(None), Step.chain_id == t.chain_id))
        .values(**values)
    )
    if t.task_state is not None:
        task_values: dict[str, object] = {
            "state": t.task_state,
            "current_step": t.step,
            "version": t.version,
            "updated_at": t.at,
        }
        if t.run_id is not None:
            task_values["run_id"] = t.run_id
        await session.execute(
            update(Task)
            .where(Task.task_id == t.task_id, Task.version < t.version)
            .where(or_(Task.chain_id.is_(None), Task.chain_id == t.chain_id))
            .values(**task_values)
        )
    return cast("CursorResult[Any]", result).rowcount or 0


async def task_exists(session: AsyncSession, task_id: str) -> bool:
    return (await session.execute(select(Task.task_id).where(Task.task_id == task_id))).first() is not None


async def record_audit(session: AsyncSession, record: AuditRecord) -> bool:
    """Write an operator action once (keyed by task, run and the run's transition)."""
    async with session.begin():
        exists = await session.execute(
            select(AuditEntry.id).where(
                AuditEntry.task_id == record.task_id, AuditEntry.run_id == record.run_id, AuditEntry.seq == record.seq
            )
        )
        if exists.first() is not None:
            return False
        session.add(AuditEntry(**record.model_dump()))
    return True
