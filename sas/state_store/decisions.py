"""The Supervisor's writes: a decision, the FailureCount and CompleteBy it sets, and its alert.

Each decision is keyed (task, step, FailureCount, kind) and claimed with a
compare-and-set on the step row, so a restarted sweep or a second Supervisor
never acts twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.alerts import raise_alert
from sas.state_store.tables import Alert, Decision, Step, Task


async def claim_decision(
    session: AsyncSession,
    decision: Decision,
    seen_failure_count: int,
    seen_version: int,
    next_look_at: datetime,
    alert: Alert | None,
) -> bool:
    """Record ``decision`` (and raise or update its alert) if the step is still as the sweep saw it.

    Returns False when another sweep already decided, or the Scheduler moved the
    step on; nothing is written then.
    """
    try:
        async with session.begin():
            claimed = await session.execute(
                update(Step)
                .where(
                    Step.task_id == decision.task_id,
                    Step.name == decision.step,
                    Step.failure_count == seen_failure_count,
                    Step.version == seen_version,
                )
                .values(failure_count=decision.failure_count, complete_by=next_look_at)
            )
            return await _record_claimed(session, cast("CursorResult[Any]", claimed).rowcount, decision, alert)
    except IntegrityError:
        # The unique (task, step, FailureCount, kind) key: someone else recorded it first.
        return False


async def defer_step(
    session: AsyncSession, task_id: str, step: str, seen_version: int, seen_failure_count: int, until: datetime
) -> bool:
    """Put off the Supervisor's next look at a step that Temporal shows waiting (for a worker,
    or for the workflow to take in a decision), without counting a failure."""
    async with session.begin():
        moved = await session.execute(
            update(Step)
            .where(
                Step.task_id == task_id,
                Step.name == step,
                Step.version == seen_version,
                Step.failure_count == seen_failure_count,
            )
            .values(complete_by=until)
        )
        return bool(cast("CursorResult[Any]", moved).rowcount)


async def claim_cleanup(
    session: AsyncSession, decision: Decision, seen_state: str, seen_version: int, version: int, alert: Alert | None
) -> bool:
    """Mark a task whose workflow died as Error and record the clean-up decision, once.

    The task row is compared-and-set on the state and version the check saw; the
    new version is above anything the dead workflow could still write."""
    try:
        async with session.begin():
            claimed = await session.execute(
                update(Task)
                .where(Task.task_id == decision.task_id, Task.state == seen_state, Task.version == seen_version)
                .values(state="Error", version=version, updated_at=decision.decided_at)
            )
            return await _record_claimed(session, cast("CursorResult[Any]", claimed).rowcount, decision, alert)
    except IntegrityError:
        return False


async def _record_claimed(session: AsyncSession, claimed_rows: int, decision: Decision, alert: Alert | None) -> bool:
    """Inside the claim's transaction: record the decision and its alert if the claim won."""
    if not claimed_rows:
        return False
    session.add(decision)
    # Flush now: a duplicate decision must fail before the alert is touched.
    await session.flush()
    if alert is not None:
        await raise_alert(session, alert)
    return True


async def unsent_decisions(session: AsyncSession, limit: int) -> list[Decision]:
    """Decisions whose signal (or clean-up start) has not been confirmed (the outbox)."""
    query = select(Decision).where(Decision.signal_sent_at.is_(None)).order_by(Decision.id).limit(limit)
    return list((await session.scalars(query)).all())


async def mark_sent(session: AsyncSession, decision_id: int, at: datetime) -> None:
    async with session.begin():
        await session.execute(update(Decision).where(Decision.id == decision_id).values(signal_sent_at=at))


async def undo_retries(session: AsyncSession, task_id: str, step: str) -> int:
    """How many times the Supervisor has already retried this step's undo."""
    found = await session.execute(
        select(func.count())
        .select_from(Decision)
        .where(
            Decision.task_id == task_id,
            Decision.step == step,
            Decision.kind == "retry",
            Decision.observed_state == "CompensationFailed",
        )
    )
    return int(found.scalar_one())
