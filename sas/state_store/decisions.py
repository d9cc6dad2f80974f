"""The Supervisor's writes: a decision, the FailureCount and CompleteBy it sets, and its alert.

Each decision is keyed (task, step, FailureCount, kind) and claimed with a
compare-and-set on the step row, so a restarted sweep or a second Supervisor
never acts twice. The step and task rows are written by the one writer
(``sas.state_store.mirror``); this module writes the decisions and their alerts.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store import mirror
from sas.state_store.alerts import raise_alert
from sas.state_store.queries import tasks_in_buckets
from sas.state_store.tables import Alert, Decision
from sas.task_models import StepState


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
            claimed = await mirror.claim_step(
                session,
                decision.task_id,
                decision.step,
                seen_failure_count,
                seen_version,
                decision.failure_count,
                next_look_at,
            )
            return await _record_claimed(session, claimed, decision, alert)
    except IntegrityError:
        # The unique (task, step, FailureCount, kind) key: someone else recorded it first.
        return False


async def defer_step(
    session: AsyncSession, task_id: str, step: str, seen_version: int, seen_failure_count: int, until: datetime
) -> bool:
    """Put off the Supervisor's next look at a step that Temporal shows waiting (for a worker,
    or for the workflow to take in a decision), without counting a failure."""
    async with session.begin():
        return await mirror.put_off_step(session, task_id, step, seen_version, seen_failure_count, until)


async def claim_cleanup(
    session: AsyncSession, decision: Decision, seen_state: str, seen_version: int, version: int, alert: Alert | None
) -> bool:
    """Mark a task whose workflow died as Error and record the clean-up decision, once.

    The task row is compared-and-set on the state and version the check saw; the
    new version is above anything the dead workflow could still write."""
    try:
        async with session.begin():
            claimed = await mirror.claim_cleanup(
                session, decision.task_id, seen_state, seen_version, version, decision.decided_at
            )
            return await _record_claimed(session, claimed, decision, alert)
    except IntegrityError:
        return False


async def _record_claimed(session: AsyncSession, claimed: bool, decision: Decision, alert: Alert | None) -> bool:
    """Inside the claim's transaction: record the decision and its alert if the claim won."""
    if not claimed:
        return False
    session.add(decision)
    # Flush now: a duplicate decision must fail before the alert is touched.
    await session.flush()
    if alert is not None:
        await raise_alert(session, alert)
    return True


async def unsent_decisions(session: AsyncSession, limit: int, buckets: tuple[int, int] | None = None) -> list[Decision]:
    """Decisions whose signal (or clean-up start) has not been confirmed (the outbox), oldest
    first, of the tasks in a shard's ``buckets`` (all of them when None)."""
    query = select(Decision).where(Decision.signal_sent_at.is_(None))
    if buckets is not None:
        query = query.where(Decision.task_id.in_(tasks_in_buckets(buckets)))
    return list((await session.scalars(query.order_by(Decision.id).limit(limit))).all())


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
            Decision.observed_state == StepState.COMPENSATION_FAILED,
        )
    )
    return int(found.scalar_one())
