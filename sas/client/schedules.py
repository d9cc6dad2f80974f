"""Recurring tasks through Temporal Schedules: ``TaskClient.create_schedule``, ``schedules``,
``pause_schedule``, ``unpause_schedule`` and ``delete_schedule``.

Each run is its own workflow, whose id Temporal makes from the schedule id and the run's time,
so each run is its own task with its own idempotency keys; it is started as every task is
(``sas.client.submitting.schedule_action``): the deployment's queue, the priority, the UI's
summary. Its timing is kept within the bounds of ``sas.client.schedule_spec``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sas.client.errors import InvalidInput, TaskIdTaken, TaskNotFound

if TYPE_CHECKING:
    from temporalio.client import Client, Schedule
    from temporalio.common import Priority

Change = Literal["pause", "unpause", "delete"]
# What each change did, in words (``ScheduleChange.done``).
_DONE = {"pause": "paused", "unpause": "unpaused", "delete": "deleted"}
# Runs shown of each schedule: the next ones due and the last ones started.
SHOWN_RUNS = 3


@dataclass(frozen=True)
class ScheduleView:
    """One schedule: whether it is ``paused``, its next run times and the task ids of its last
    runs (at most three of each)."""

    schedule_id: str
    paused: bool
    next_runs: list[datetime] = field(default_factory=list)
    recent_runs: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        """The schedule as ``sas schedule list --json`` prints it."""
        return {
            "id": self.schedule_id,
            "paused": self.paused,
            "next_runs": [t.isoformat() for t in self.next_runs],
            "recent_runs": self.recent_runs,
        }


@dataclass(frozen=True)
class ScheduleChange:
    """What a schedule call did: ``done`` is ``created``, ``paused``, ``unpaused`` or ``deleted``."""

    schedule_id: str
    done: str


def check_timing(cron: str | None, every: str | None, min_interval_s: int) -> tuple[str | None, Any]:
    """Exactly one of ``cron`` and ``every``, within the bounds: the cron expression, or the interval."""
    from sas.client.schedule_spec import check_cron, parse_every

    if bool(cron) == bool(every):
        raise InvalidInput("give exactly one of --cron or --every", field="cron")
    if cron:
        return check_cron(cron), None
    return None, parse_every(every or "", min_interval_s)


def build_schedule(
    task_type: str,
    payload: dict[str, Any],
    schedule_id: str,
    task_queue: str,
    cron: str | None,
    every: str | None,
    min_interval_s: int = 60,
    priority: Priority | None = None,
) -> Schedule:
    """The Schedule whose runs are tasks of ``task_type`` with ``payload``, at ``cron`` or ``every``."""
    from temporalio.client import (
        Schedule,
        ScheduleIntervalSpec,
        ScheduleOverlapPolicy,
        SchedulePolicy,
        ScheduleSpec,
        ScheduleState,
    )
    from temporalio.common import Priority

    from sas.client.submitting import new_task, schedule_action

    expression, interval = check_timing(cron, every, min_interval_s)
    spec = (
        ScheduleSpec(cron_expressions=[expression])
        if expression
        else ScheduleSpec(intervals=[ScheduleIntervalSpec(every=interval)])
    )
    return Schedule(
        action=schedule_action(
            new_task(task_type, schedule_id, payload, task_queue, priority=priority or Priority.default)
        ),
        spec=spec,
        # A run still going when the next is due is not doubled up; the next waits its turn.
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.BUFFER_ONE),
        state=ScheduleState(note=f"sas {task_type} schedule"),
    )


async def create(client: Client, schedule_id: str, schedule: Schedule) -> ScheduleChange:
    """Create the schedule; ``TaskIdTaken`` if one of that id exists."""
    from temporalio.client import ScheduleAlreadyRunningError
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        raise TaskIdTaken(f"schedule {schedule_id!r} already exists", "delete it first, or pick another id") from None
    except RPCError as err:
        # What sas's own checks let through and Temporal refuses: its reason, in one line.
        if err.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        raise InvalidInput(f"Temporal refused the schedule: {' '.join(err.message.split())}") from None
    return ScheduleChange(schedule_id, "created")


async def list_schedules(client: Client, team: str | None = None) -> list[ScheduleView]:
    """Every schedule of the namespace, as Temporal lists them; ``team``: those whose runs are
    tasks of that team's types."""
    found = []
    async for entry in await client.list_schedules():
        if team is not None and not _of_team(team, getattr(getattr(entry.schedule, "action", None), "workflow", None)):
            continue
        info = entry.info
        found.append(
            ScheduleView(
                entry.id,
                bool(entry.schedule and entry.schedule.state.paused),
                list(info.next_action_times if info else [])[:SHOWN_RUNS],
                [
                    a.action.workflow_id
                    for a in (info.recent_actions if info else [])
                    if hasattr(a.action, "workflow_id")
                ][-SHOWN_RUNS:],
            )
        )
    return found


async def change(client: Client, schedule_id: str, what: Change, note: str, team: str | None = None) -> ScheduleChange:
    """Pause, unpause or delete the schedule (``note``: why, shown in the UI); ``TaskNotFound``
    if there is none of that id; ``OutsideTeam`` if ``team`` is given and its runs are not of
    that team's types."""
    from temporalio.service import RPCError, RPCStatusCode

    if what not in _DONE:
        raise InvalidInput(f"unknown schedule change {what!r}: pause, unpause or delete", field="what")
    handle = client.get_schedule_handle(schedule_id)
    try:
        if team is not None:
            action = (await handle.describe()).schedule.action
            workflow = getattr(action, "workflow", None)
            if not _of_team(team, workflow):
                from sas.client.errors import OutsideTeam

                raise OutsideTeam(
                    f"schedule {schedule_id} starts tasks of {workflow}, not of team {team}'s types: this client"
                    f" acts for team {team} only, and did nothing",
                    "ask an operator of that team, or the platform's (SAS_OPERATOR__TEAM unset)",
                )
        if what == "pause":
            await handle.pause(note=note or "paused with sas")
        elif what == "unpause":
            await handle.unpause(note=note or "unpaused with sas")
        else:
            await handle.delete()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFound(f"no schedule {schedule_id!r}", "see `sas schedule list`") from None
        raise
    return ScheduleChange(schedule_id, _DONE[what])


def _of_team(team: str, workflow: object) -> bool:
    """Whether a schedule whose runs are workflows of type ``workflow`` starts ``team``'s tasks."""
    from sas.workflows.registry import by_workflow_name

    found = by_workflow_name(workflow) if isinstance(workflow, str) else None
    return found is not None and found.definition.team == team
