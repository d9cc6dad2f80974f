"""``sas schedule``: recurring tasks through Temporal Schedules.

Each run is its own workflow, whose id Temporal makes from the schedule id and the
run's time, so each run is its own task with its own idempotency keys."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from sas.cli import context
from sas.cli.output import CliError, ago, console, print_json, shown, table
from sas.cli.schedule_spec import check_cron, parse_every
from sas.cli.task_input import SET_OPTION, InputCommand

if TYPE_CHECKING:
    from temporalio.client import Client, Schedule
    from temporalio.common import Priority

# sas.task_models.ids.MAX_SCHEDULE_ID, written out so that `--help` loads no model (a test checks they agree).
MAX_SCHEDULE_ID = 107

schedule_app = typer.Typer(
    help="Recurring tasks (Temporal Schedules): create, list, pause, unpause, delete.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")


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
    """The Schedule for ``sas schedule create``; its timing within the bounds of ``schedule_spec``.
    Each run is started as every task is (``sas.client.submitting.schedule_action``): the
    deployment's queue, the priority, the UI's summary."""
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

    if bool(cron) == bool(every):
        raise CliError("give exactly one of --cron or --every")
    spec = (
        ScheduleSpec(cron_expressions=[check_cron(cron)])
        if cron
        else ScheduleSpec(intervals=[ScheduleIntervalSpec(every=parse_every(every or "", min_interval_s))])
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


@schedule_app.command("create", cls=InputCommand)
def create(
    schedule_id: str = typer.Argument(
        ..., help=f"Schedule id (at most {MAX_SCHEDULE_ID} characters); each run's task id is <id>-<time>."
    ),
    cron: str | None = typer.Option(
        None, help="Cron expression, five fields (minute hour day month weekday), e.g. '0 9 * * MON-FRI', or @daily."
    ),
    every: str | None = typer.Option(
        None, help="Interval: 15m, 1h, 1d; from 1m (SAS_SCHEDULES__MIN_INTERVAL_S) to 366d."
    ),
    file: Path | None = typer.Option(None, "--input", help="JSON file with the task input ('-' for stdin)."),
    task_type: str | None = typer.Option(
        None, "--type", help="The task type, required: any registered one (`sas types` lists them)."
    ),
    sets: list[str] = SET_OPTION,
    priority: int | None = typer.Option(
        None, "--priority", help="Each run's priority, 1 (most urgent) to 5, as sas submit's. Default: 3."
    ),
) -> None:
    """Create a schedule: each run is a task of --type with the input of --input and --set.
    Example: sas schedule create nightly --every 1d --type TYPE --input task.json"""
    from sas.cli import tasks
    from sas.cli.task_input import build_input, require_type

    tasks.check_schedule_id(schedule_id)
    task_type = require_type(task_type)
    payload = build_input(task_type, file, sets or ())
    urgency = tasks.check_priority(priority)
    settings = context.settings()
    schedule = build_schedule(
        task_type,
        payload,
        schedule_id,
        settings.temporal.task_queue,
        cron,
        every,
        settings.schedules.min_interval_s,
        priority=urgency,
    )

    async def go() -> None:
        from temporalio.client import ScheduleAlreadyRunningError
        from temporalio.service import RPCError, RPCStatusCode

        client: Client = await context.client()
        try:
            await client.create_schedule(schedule_id, schedule)
        except ScheduleAlreadyRunningError:
            raise CliError(f"schedule {schedule_id!r} already exists", "delete it first, or pick another id") from None
        except RPCError as err:
            # What sas's own checks let through and Temporal refuses: its reason, in one line.
            if err.status != RPCStatusCode.INVALID_ARGUMENT:
                raise
            raise CliError(f"Temporal refused the schedule: {' '.join(err.message.split())}") from None

    context.run(go)
    console.print(f"schedule {shown(schedule_id)} created; `sas schedule list` shows its next runs")


@schedule_app.command("list")
def list_schedules(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List schedules with their next run times."""

    async def go() -> list[dict[str, Any]]:
        client: Client = await context.client()
        rows = []
        async for entry in await client.list_schedules():
            info = entry.info
            rows.append(
                {
                    "id": entry.id,
                    "paused": bool(entry.schedule and entry.schedule.state.paused),
                    "next_runs": [t.isoformat() for t in (info.next_action_times if info else [])][:3],
                    "recent_runs": [
                        a.action.workflow_id
                        for a in (info.recent_actions if info else [])
                        if hasattr(a.action, "workflow_id")
                    ][-3:],
                }
            )
        return rows

    rows = context.run(go)
    if as_json:
        print_json(rows)
        return
    from datetime import datetime

    console.print(
        table(
            f"{len(rows)} schedule(s)",
            ["id", "paused", "next run", "recent runs"],
            [
                [
                    r["id"],
                    "yes" if r["paused"] else "no",
                    ago(datetime.fromisoformat(r["next_runs"][0])) if r["next_runs"] else "-",
                    "\n".join(r["recent_runs"]),
                ]
                for r in rows
            ],
        )
    )


def _handle_action(schedule_id: str, action: str, note: str) -> None:

    async def go() -> None:
        from temporalio.service import RPCError, RPCStatusCode

        client: Client = await context.client()
        handle = client.get_schedule_handle(schedule_id)
        try:
            if action == "pause":
                await handle.pause(note=note or "paused with sas")
            elif action == "unpause":
                await handle.unpause(note=note or "unpaused with sas")
            else:
                await handle.delete()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise CliError(f"no schedule {schedule_id!r}", "see `sas schedule list`") from None
            raise

    context.run(go)
    console.print(f"schedule {shown(schedule_id)}: {'paused' if action == 'pause' else action + 'd'}")


@schedule_app.command("pause")
def pause(schedule_id: str, reason: str = typer.Option("", help="Why, shown in the UI.")) -> None:
    """Pause a schedule: no new runs until unpaused."""
    _handle_action(schedule_id, "pause", reason)


@schedule_app.command("unpause")
def unpause(schedule_id: str, reason: str = typer.Option("", help="Why, shown in the UI.")) -> None:
    """Resume a paused schedule."""
    _handle_action(schedule_id, "unpause", reason)


@schedule_app.command("delete")
def delete(schedule_id: str) -> None:
    """Delete a schedule (runs already started go on)."""
    _handle_action(schedule_id, "delete", "")
