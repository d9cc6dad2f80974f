"""Operator alerts: raised once per incident, listed, acknowledged, resolved - by an
operator or by themselves when the task recovers - and delivered to a webhook.

A task's own alert is *folded* while the task is a member of an open incident (one alert for
every task failing for one cause, ``sas.state_store.incidents``): it is kept, and ``sas show``
lists it, but it is not listed by default nor sent to the webhook; the incident is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, and_, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from sas.state_store.incident_tables import IncidentTask
from sas.state_store.mirror_tables import Step, Task
from sas.state_store.tables import Alert
from sas.task_models import StepState, TaskState

ALERT_STATUSES = ("open", "acked", "resolved")
# The kind of an incident's alert (state_store.incidents).
INCIDENT = "incident"
ACTIVE = ("open", "acked")
_SEVERITY = {"info": 0, "warning": 1, "critical": 2}


def folded() -> ColumnElement[bool]:
    """True for a task's alert whose task (at that step) is in an open incident."""
    incident = aliased(Alert)
    return (
        select(IncidentTask.task_id)
        .join(incident, incident.id == IncidentTask.alert_id)
        .where(IncidentTask.task_id == Alert.task_id, IncidentTask.step == Alert.step)
        .where(incident.status.in_(ACTIVE))
        .exists()
    )


def owned_by(task_types: Sequence[str]) -> ColumnElement[bool]:
    """True for an alert of a task of one of ``task_types`` (a team's), and for an incident one
    of whose tasks is."""
    of_task = select(Task.task_id).where(Task.task_id == Alert.task_id, Task.task_type.in_(task_types)).exists()
    of_incident = (
        select(IncidentTask.task_id)
        .join(Task, Task.task_id == IncidentTask.task_id)
        .where(IncidentTask.alert_id == Alert.id, Task.task_type.in_(task_types))
        .exists()
    )
    return or_(of_task, of_incident)


async def task_types_of_alerts(session: AsyncSession, alert_ids: Sequence[int]) -> dict[int, set[str]]:
    """The task types each alert is about: its task's, or an incident's tasks'."""
    found: dict[int, set[str]] = {i: set() for i in alert_ids}
    if not alert_ids:
        return found
    own = select(Alert.id, Task.task_type).join(Task, Task.task_id == Alert.task_id).where(Alert.id.in_(alert_ids))
    members = (
        select(IncidentTask.alert_id, Task.task_type)
        .join(Task, Task.task_id == IncidentTask.task_id)
        .where(IncidentTask.alert_id.in_(alert_ids))
        .distinct()
    )
    for query in (own, members):
        for alert_id, task_type in (await session.execute(query)).all():
            found[int(alert_id)].add(str(task_type))
    return found


async def list_alerts(
    session: AsyncSession,
    status: str | None = None,
    limit: int = 100,
    *,
    include_folded: bool = True,
    task_types: Sequence[str] | None = None,
) -> list[Alert]:
    """Alerts, newest first; without ``include_folded``, not those folded into an open incident;
    with ``task_types``, only those these types own (``owned_by``)."""
    query = select(Alert).order_by(Alert.id.desc()).limit(limit)
    if status is not None:
        query = query.where(Alert.status == status)
    if task_types is not None:
        query = query.where(owned_by(task_types))
    if not include_folded:
        query = query.where(~folded())
    return list((await session.scalars(query)).all())


async def count_folded(
    session: AsyncSession, status: str | None = None, task_types: Sequence[str] | None = None
) -> int:
    """How many alerts (in ``status``; of ``task_types``, ``owned_by``) are folded into open incidents."""
    query = select(func.count()).select_from(Alert).where(folded())
    if status is not None:
        query = query.where(Alert.status == status)
    if task_types is not None:
        query = query.where(owned_by(task_types))
    return int(await session.scalar(query) or 0)


# The operator's transitions (docs/operator.md, "Alerts"): from each status, where `ack` and
# `resolve` may take an alert. Anything else changes nothing. The Supervisor has two more:
# it resolves an alert whose task recovered, and reopens a resolved one when the same
# incident is seen again (``raise_alert``).
TRANSITIONS: dict[str, dict[str, str]] = {
    "ack": {"open": "acked"},
    "resolve": {"open": "resolved", "acked": "resolved"},
}
OPERATOR_RESOLUTION = "resolved by an operator"


@dataclass(frozen=True)
class AlertChange:
    """What an operator's ``ack`` or ``resolve`` did: ``before`` -> ``after``, or nothing
    (``changed`` False, ``after`` the status it stays in). ``before`` is None: no such alert."""

    alert_id: int
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before is not None and self.before != self.after


async def set_alert_status(session: AsyncSession, alert_id: int, action: str, at: datetime) -> AlertChange:
    """Apply an operator's ``action`` (ack | resolve) to an alert, by the state machine above.

    A compare-and-set on the status read, so a Supervisor resolving or reopening the alert at
    the same moment is never overwritten: the loser re-reads and judges again."""
    if action not in TRANSITIONS:
        raise ValueError(f"unknown alert action {action!r}; use one of {', '.join(TRANSITIONS)}")
    while True:
        async with session.begin():
            before = await session.scalar(select(Alert.status).where(Alert.id == alert_id))
            if before is None:
                return AlertChange(alert_id, None, None)
            after = TRANSITIONS[action].get(before)
            if after is None:
                return AlertChange(alert_id, before, before)
            values: dict[str, object] = {"status": after, "updated_at": at}
            if after == "resolved":
                values.update(resolved_at=at, resolution=OPERATOR_RESOLUTION)
            result = await session.execute(
                update(Alert).where(Alert.id == alert_id, Alert.status == before).values(**values)
            )
            if cast("CursorResult[Any]", result).rowcount:
                return AlertChange(alert_id, before, after)


async def raise_alert(session: AsyncSession, alert: Alert) -> Alert:
    """Insert ``alert``, or fold it into the incident already raised under its key.

    Inside the caller's transaction. A repeat updates the FailureCount, message and
    last error; a higher severity, or a reopened incident, is delivered again."""
    existing = (await session.scalars(select(Alert).where(Alert.incident_key == alert.incident_key))).first()
    if existing is None:
        session.add(alert)
        await session.flush()
        return alert
    escalated = _SEVERITY.get(alert.severity, 1) > _SEVERITY.get(existing.severity, 1)
    reopened = existing.status == "resolved"
    existing.failure_count = max(existing.failure_count, alert.failure_count)
    existing.message = alert.message
    existing.last_error = alert.last_error or existing.last_error
    existing.suggested_action = alert.suggested_action
    existing.updated_at = alert.updated_at
    if escalated:
        existing.severity = alert.severity
    if reopened:
        existing.status, existing.resolved_at, existing.resolution = "open", None, None
    if escalated or reopened:
        existing.delivered_at, existing.delivery_attempts, existing.next_delivery_at = None, 0, None
    return existing


async def raise_refused_result(
    session: AsyncSession, task_id: str, step: str | None, claim: str, at: datetime
) -> Alert:
    """The critical alert for a result no Agent of sas sealed, which the Scheduler refused (a step,
    an undo or a fan-out item completed from outside): raised with its audit entry, one incident
    per step. Inside the caller's transaction."""
    return await raise_alert(
        session,
        Alert(
            incident_key=f"foreign_result:{task_id}:{step}",
            severity="critical",
            kind="foreign_result",
            task_id=task_id,
            step=step,
            failure_count=0,
            message=f"task {task_id}: step {step}: {claim}",
            suggested_action=(
                "someone with write access to the namespace completed sas's work from outside: find who in the "
                "task's history (ActivityTaskCompleted's identity); sas did not take it, and the step's undo "
                f"asks the service what was really done (`sas show {task_id}`)"
            ),
            status="open",
            created_at=at,
            updated_at=at,
            delivery_attempts=0,
        ),
    )


async def resolve_alert(session: AsyncSession, alert: Alert, at: datetime, why: str) -> None:
    """Close an alert by itself; its key is freed so a new incident gets a new alert."""
    alert.status, alert.resolved_at, alert.resolution, alert.updated_at = "resolved", at, why, at
    alert.incident_key = f"{alert.incident_key}#{alert.id}"


async def resolve_recovered(
    session: AsyncSession, at: datetime, bucket_range: tuple[int, int] | None = None, limit: int = 200
) -> int:
    """Resolve the active alerts whose task recovered: the task is Processed or
    Compensated, or the alert's step moved on to Processed or Compensated.

    Reads only active alerts (index on status), so the cost follows the open incidents."""
    query = (
        select(Alert, Task.state, Step.state)
        .join(Task, Task.task_id == Alert.task_id)
        .outerjoin(Step, and_(Step.task_id == Alert.task_id, Step.name == Alert.step))
        .where(Alert.status.in_(ACTIVE))
        .where(
            or_(
                Task.state.in_((TaskState.PROCESSED, TaskState.COMPENSATED)),
                and_(
                    Step.state.in_((StepState.PROCESSED, StepState.COMPENSATED)),
                    Alert.kind.not_in(("workflow_closed",)),
                ),
            )
        )
        .order_by(Alert.id)
        .limit(limit)
    )
    if bucket_range is not None:
        query = query.where(Task.shard >= bucket_range[0], Task.shard < bucket_range[1])
    resolved = 0
    async with session.begin():
        for alert, task_state, step_state in (await session.execute(query)).all():
            why = (
                f"task {task_state}"
                if task_state in (TaskState.PROCESSED, TaskState.COMPENSATED)
                else f"step {alert.step} {step_state}"
            )
            await resolve_alert(session, alert, at, f"recovered: {why}")
            resolved += 1
    return resolved


async def active_alert(session: AsyncSession, incident_key: str) -> Alert | None:
    return (
        await session.scalars(select(Alert).where(Alert.incident_key == incident_key, Alert.status.in_(ACTIVE)))
    ).first()


async def active_alerts_of_kind(session: AsyncSession, kind: str, limit: int | None = 500) -> list[Alert]:
    """Open or acknowledged alerts of ``kind``, oldest first; ``limit`` None: all of them."""
    query = select(Alert).where(Alert.status.in_(ACTIVE), Alert.kind == kind).order_by(Alert.id)
    if limit is not None:
        query = query.limit(limit)
    return list((await session.scalars(query)).all())


async def undelivered_alerts(session: AsyncSession, now: datetime, limit: int) -> list[Alert]:
    """The webhook outbox: open alerts not yet delivered whose next try is due, and incidents
    that resolved themselves (an incident's end is news; a task's alert folded into an open
    incident is not: the incident is sent instead)."""
    sent = or_(Alert.status == "open", and_(Alert.kind == INCIDENT, Alert.status == "resolved"))
    query = (
        select(Alert)
        .where(Alert.delivered_at.is_(None), sent, ~folded())
        .where(or_(Alert.next_delivery_at.is_(None), Alert.next_delivery_at <= now))
        .order_by(Alert.id)
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


async def record_delivery(
    session: AsyncSession, alert_id: int, at: datetime, delivered: bool, next_try: datetime | None
) -> None:
    """After one webhook attempt: delivered (or given up: ``next_try`` None), or due again at ``next_try``."""
    values: dict[str, object] = {"delivery_attempts": Alert.delivery_attempts + 1}
    if delivered or next_try is None:
        values["delivered_at"] = at
    else:
        values["next_delivery_at"] = next_try
    async with session.begin():
        await session.execute(update(Alert).where(Alert.id == alert_id).values(**values))


async def claim_delivery(
    session: AsyncSession, alert_id: int, attempts: int, now: datetime, lease_until: datetime
) -> bool:
    """Take the right to post one alert to the webhook now (several Supervisors may try):
    a compare-and-set on its attempt count, leased until ``lease_until``."""
    async with session.begin():
        result = await session.execute(
            update(Alert)
            .where(Alert.id == alert_id, Alert.delivered_at.is_(None), Alert.delivery_attempts == attempts)
            .where(or_(Alert.next_delivery_at.is_(None), Alert.next_delivery_at <= now))
            .values(next_delivery_at=lease_until)
        )
    return bool(cast("CursorResult[Any]", result).rowcount)


# ------------------------------------------------------------ incidents' reads of the mirror


@dataclass(frozen=True)
class FailingStep:
    """A step waiting on a failure (Failed, parked as Error, its undo failing), for grouping by cause."""

    task_id: str
    step: str
    state: str
    agent: str | None
    error_type: str | None
    last_error: str | None
    permanent: bool
    failed_at: datetime
    next_look_at: datetime | None


async def failing_steps(session: AsyncSession, states: tuple[str, ...], limit: int) -> list[FailingStep]:
    """Steps in ``states`` of tasks still open, at most ``limit`` (the index on the step's state).

    The task's state is asked per step found, not joined: SQLite's planner, given a join, scans
    every task instead (a task state ``NOT IN`` uses no index): at 100,000 open tasks 115 ms a
    sweep against 4 ms (bench/supervisor_load.py --seeded-open, docs/benchmarks.md §18)."""
    task_open = (
        select(Task.task_id)
        .where(Task.task_id == Step.task_id, Task.state.not_in((TaskState.PROCESSED, TaskState.COMPENSATED)))
        .exists()
    )
    query = select(Step).where(Step.state.in_(states), task_open).order_by(Step.updated_at).limit(limit)
    return [
        FailingStep(
            task_id=s.task_id,
            step=s.name,
            state=s.state,
            agent=s.agent,
            error_type=s.error_type,
            last_error=s.last_error,
            permanent=s.permanent,
            failed_at=s.updated_at,
            next_look_at=s.complete_by if s.state == StepState.FAILED else None,
        )
        for s in (await session.scalars(query)).all()
    ]


@dataclass(frozen=True)
class StepPosition:
    """Where a task stands at one of its steps: enough to tell whether it moved on."""

    task_state: str
    current_step: str | None
    step_state: str | None


async def step_positions(session: AsyncSession, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], StepPosition]:
    """(task, step) -> its position, for the pairs the mirror still has."""
    found: dict[tuple[str, str], StepPosition] = {}
    for i in range(0, len(pairs), 500):
        chunk = pairs[i : i + 500]
        query = (
            select(Task.task_id, Task.state, Task.current_step, Step.name, Step.state)
            .outerjoin(Step, Step.task_id == Task.task_id)
            .where(Task.task_id.in_({t for t, _ in chunk}))
        )
        wanted = set(chunk)
        for task_id, task_state, current, name, step_state in (await session.execute(query)).all():
            if (task_id, name) in wanted:
                found[(task_id, name)] = StepPosition(task_state, current, step_state)
    return found
