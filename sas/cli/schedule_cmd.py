"""``sas schedule``: recurring tasks through Temporal Schedules (``TaskClient.create_schedule``,
``schedules``, ``pause_schedule``, ``unpause_schedule``, ``delete_schedule``).

Each run is its own workflow, whose id Temporal makes from the schedule id and the
run's time, so each run is its own task with its own idempotency keys."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from sas.cli import context
from sas.cli.output import ago, console, print_json, shown, table
from sas.cli.task_input import SET_OPTION, InputCommand

if TYPE_CHECKING:
    from sas.client.schedules import ScheduleChange

# sas.task_models.ids.MAX_SCHEDULE_ID, written out so that `--help` loads no model (a test checks they agree).
MAX_SCHEDULE_ID = 107

schedule_app = typer.Typer(
    help="Recurring tasks (Temporal Schedules): create, list, pause, unpause, delete.", no_args_is_help=True
)


def register(app: typer.Typer) -> None:
    app.add_typer(schedule_app, name="schedule")


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
    tasks.check_priority(priority)  # refused here, naming --priority
    context.call(
        lambda client: client.create_schedule(
            schedule_id, task_type, payload, cron=cron, every=every, priority=priority
        )
    )
    console.print(f"schedule {shown(schedule_id)} created; `sas schedule list` shows its next runs")


@schedule_app.command("list")
def list_schedules(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List schedules with their next run times."""
    found = context.call(lambda client: client.schedules())
    if as_json:
        print_json([f.data for f in found])
        return
    console.print(
        table(
            f"{len(found)} schedule(s)",
            ["id", "paused", "next run", "recent runs"],
            [
                [
                    f.schedule_id,
                    "yes" if f.paused else "no",
                    ago(f.next_runs[0]) if f.next_runs else "-",
                    "\n".join(f.recent_runs),
                ]
                for f in found
            ],
        )
    )


def _changed(change: ScheduleChange) -> None:
    console.print(f"schedule {shown(change.schedule_id)}: {change.done}")


@schedule_app.command("pause")
def pause(schedule_id: str, reason: str = typer.Option("", help="Why, shown in the UI.")) -> None:
    """Pause a schedule: no new runs until unpaused."""
    _changed(context.call(lambda client: client.pause_schedule(schedule_id, reason=reason)))


@schedule_app.command("unpause")
def unpause(schedule_id: str, reason: str = typer.Option("", help="Why, shown in the UI.")) -> None:
    """Resume a paused schedule."""
    _changed(context.call(lambda client: client.unpause_schedule(schedule_id, reason=reason)))


@schedule_app.command("delete")
def delete(schedule_id: str) -> None:
    """Delete a schedule (runs already started go on)."""
    _changed(context.call(lambda client: client.delete_schedule(schedule_id)))
