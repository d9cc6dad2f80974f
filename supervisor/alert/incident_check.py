"""Incidents: the Supervisor groups failing steps by cause, and a cause with more than a few
tasks is one incident - one alert with the count, the first and latest failure, the next look,
a sample of task ids and the command that acts on exactly its tasks.

Run at the start of a sweep (shard 0's scan: causes do not follow shards), so the decisions
that follow find their task already in the incident and its own alert folded into it
(``sas.state_store.alerts.folded``). A task stays in the incident while its step fails for that
cause or is being retried; it leaves when it moves on (its step done or undone, the task at
another step or finished, or failing for another cause). The incident resolves itself when
its last task has left. The webhook hears of an incident when it opens, escalates (a task
parked for an operator), doubles in size and resolves: not once per task.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.state_store.alerts import INCIDENT, StepPosition, failing_steps, step_positions
from sas.state_store.incident_tables import Incident
from sas.state_store.incidents import (
    OpenIncident,
    announce,
    join,
    leave,
    open_incidents,
    raise_incident,
    resolve_incident,
)
from sas.supervisor.alert.raising import alert_row
from sas.supervisor.decide import Cause, Failing, Group, group
from sas.supervisor.models import AlertSpec
from sas.task_models import StepState, TaskState

log = logging.getLogger("sas.supervisor")

# Steps in these states wait on a failure: for the Supervisor's next try, an operator, or an undo's retry.
FAILING = (StepState.FAILED, StepState.ERROR, StepState.COMPENSATION_FAILED)
# A member whose step is in one of these, at the same step of a task still open, is being retried.
_RETRYING = (StepState.PENDING, StepState.PROCESSING)
_FINISHED = (TaskState.PROCESSED, TaskState.COMPENSATED)
# Failing steps read per check; beyond it the oldest failures are grouped (an incident of more
# than this many tasks still counts them as they come and go).
READ_LIMIT = 20_000
SAMPLE = 5


@dataclass
class IncidentCheck:
    opened: int = 0
    resolved: int = 0
    open: int = 0
    members: int = 0


async def check_incidents(sessions: async_sessionmaker[AsyncSession], min_tasks: int, now: datetime) -> IncidentCheck:
    """Bring the incidents in line with the failing steps now: open, grow, shrink, resolve."""
    result = IncidentCheck()
    async with sessions() as session, session.begin():
        failing = await failing_steps(session, FAILING, READ_LIMIT)
        groups = group(failing)
        cause_of_pair = {(s.task_id, s.step): key for key, g in groups.items() for s in g.steps}
        current = {i.incident.cause_key: i for i in await open_incidents(session)}
        away = [
            (task_id, m.step)
            for i in current.values()
            for task_id, m in i.members.items()
            if (task_id, m.step) not in cause_of_pair
        ]
        positions = await step_positions(session, away) if away else {}
        for key in set(current) | {k for k, g in groups.items() if len(g.task_ids) >= min_tasks}:
            found = current.get(key)
            g = groups.get(key)
            if found is None and g is not None:
                found = await _open(session, g, now)
                result.opened += 1
            assert found is not None
            stayed = await _members(session, found, g, cause_of_pair, positions, now)
            if not stayed:
                await resolve_incident(session, found.alert, now, _ended(found))
                result.resolved += 1
                log.info("incident resolved", extra={"fields": {"incident": found.alert.id, "cause": key}})
                continue
            _refresh(found, g, stayed, now)
            result.open += 1
            result.members += len(stayed)
    return result


async def _open(session: AsyncSession, g: Group, now: datetime) -> OpenIncident:
    cause = g.cause
    first = g.steps[0]
    alert = alert_row(
        AlertSpec(severity="warning", kind=INCIDENT, message=cause.describe(), suggested_action=""),
        None,
        cause.step,
        len(g.task_ids),
        first.last_error,
        now,
        key=f"{INCIDENT}:{cause.key}",
    )
    incident = Incident(
        cause_key=cause.key,
        service=cause.service,
        step=cause.step,
        error_type=cause.error_type,
        error_text=cause.text,
        task_count=0,
        parked=0,
        first_at=first.failed_at,
        latest_at=first.failed_at,
        sample=[],
        delivered_count=len(g.task_ids),
    )
    row, incident, new = await raise_incident(session, alert, incident)
    if new:
        log.warning(
            "incident",
            extra={"fields": {"incident": row.id, "cause": cause.describe(), "tasks": len(g.task_ids)}},
        )
    return OpenIncident(row, incident)


async def _members(
    session: AsyncSession,
    found: OpenIncident,
    g: Group | None,
    cause_of_pair: dict[tuple[str, str], str],
    positions: dict[tuple[str, str], StepPosition],
    now: datetime,
) -> list[str]:
    """Add the cause's failing tasks, drop those that moved on; the members left."""
    key = found.incident.cause_key
    gone = []
    for task_id, m in found.members.items():
        pair = (task_id, m.step)
        if pair in cause_of_pair:
            if cause_of_pair[pair] != key:
                gone.append(task_id)  # failing for another cause now
        elif not _being_retried(positions.get(pair), m.step):
            gone.append(task_id)
    if gone:
        await leave(session, found.alert.id, gone)
        for task_id in gone:
            del found.members[task_id]
    for s in g.steps if g is not None else []:
        if s.task_id not in found.members:
            found.members[s.task_id] = join(session, found.alert.id, s.task_id, s.step, now)
    return sorted(found.members, key=lambda t: (found.members[t].joined_at, t))


def _being_retried(position: StepPosition | None, step: str) -> bool:
    return (
        position is not None
        and position.task_state not in _FINISHED
        and position.current_step == step
        and position.step_state in _RETRYING
    )


def _refresh(found: OpenIncident, g: Group | None, members: list[str], now: datetime) -> None:
    """The incident's counts, times, severity and texts from its members now."""
    alert, incident = found.alert, found.incident
    steps: list[Failing] = [s for s in (g.steps if g else []) if s.task_id in found.members]
    incident.task_count = len(members)
    incident.parked = sum(s.state != StepState.FAILED for s in steps)
    if steps:
        incident.first_at = min(incident.first_at, steps[0].failed_at)
        incident.latest_at = max(incident.latest_at, max(s.failed_at for s in steps))
    looks = [s.next_look_at for s in steps if s.next_look_at is not None and s.state == StepState.FAILED]
    incident.next_look_at = min(looks) if looks else None
    incident.sample = members[:SAMPLE]
    critical = incident.parked > 0 or any(s.permanent for s in steps)
    if critical and alert.severity != "critical":
        alert.severity = "critical"
        announce(alert)
    if incident.task_count >= 2 * max(incident.delivered_count, 1) and alert.delivered_at is not None:
        incident.delivered_count = incident.task_count
        announce(alert)
    cause = Cause(incident.service, incident.step, incident.error_type, incident.error_text)
    alert.failure_count = incident.task_count
    alert.message = message(incident, cause)
    alert.suggested_action = suggestion(alert.id, incident)
    alert.updated_at = now


def message(incident: Incident, cause: Cause) -> str:
    """One line: how many tasks fail how, since when, and when the Supervisor looks again."""
    since = incident.first_at.strftime("%H:%M:%S")
    latest = incident.latest_at.strftime("%H:%M:%S")
    parked = f", {incident.parked} parked" if incident.parked else ""
    look = f"; next look {incident.next_look_at.strftime('%H:%M:%S')} UTC" if incident.next_look_at else ""
    return (
        f"{incident.task_count} tasks{parked}: {cause.describe()}; since {since} UTC, latest {latest} UTC{look}; "
        f"e.g. {', '.join(incident.sample[:3])}"
    )


def suggestion(alert_id: int, incident: Incident) -> str:
    what = f"the {incident.service} service" if incident.service else f"the cause at step {incident.step}"
    return (
        f"fix {what}, then `sas retry --incident {alert_id} --dry-run` and `--yes` (its {incident.task_count} "
        f"tasks, exactly); or `sas compensate --incident {alert_id} --yes` to undo them"
    )


def _ended(found: OpenIncident) -> str:
    return f"recovered: every task moved on (at most {max(found.incident.task_count, 1)} were in it)"
