"""The Supervisor's writes: a decision, the FailureCount and CompleteBy it sets, and its alert.

Each decision is keyed (task, step, FailureCount) and claimed with a compare-and-set
on the step row, so a restarted sweep or a second Supervisor never acts twice.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from state_store.tables import Alert, Decision, Step


async def claim_decision(
    session: AsyncSession,
    decision: Decision,
    seen_failure_count: int,
    seen_version: int,
    next_look_at: datetime,
    alert: Alert | None,
) -> bool:
    """Record ``decision`` (and its alert) if the step is still as the sweep saw it.

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
            if not claimed.rowcount:
                return False
            session.add(decision)
            if alert is not None and await _alert_is_new(session, alert.incident_key):
                session.add(alert)
        return True
    except IntegrityError:
        # The unique (task, step, FailureCount) key: someone else recorded it first.
        return False


async def _alert_is_new(session: AsyncSession, incident_key: str) -> bool:
    found = await session.execute(select(Alert.id).where(Alert.incident_key == incident_key))
    return found.first() is None


async def unsent_decisions(session: AsyncSession, limit: int) -> list[Decision]:
    """Decisions whose signal has not been confirmed sent (the outbox)."""
    query = select(Decision).where(Decision.signal_sent_at.is_(None)).order_by(Decision.id).limit(limit)
    return list((await session.scalars(query)).all())


async def mark_sent(session: AsyncSession, decision_id: int, at: datetime) -> None:
    async with session.begin():
        await session.execute(update(Decision).where(Decision.id == decision_id).values(signal_sent_at=at))
