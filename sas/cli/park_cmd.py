"""``sas park``: park a task's running or waiting step as Error, hung calls too, until
``sas retry``."""

from __future__ import annotations

import typer

from sas.cli import acting
from sas.cli.output import command_line, console, shown


def register(app: typer.Typer) -> None:
    app.command()(park)


def park(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = typer.Option(None, help="Step to park (default: the running or waiting one)."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Park a task's running or waiting step as Error until `sas retry` (hung calls too)."""
    done = acting.act(task_id, by, reason, lambda c, who: c.park(task_id, step=step, by=who, reason=reason))
    console.print(f"{shown(task_id)}: {shown(done.message)}; to resume it:")
    command_line(f"  sas retry {task_id}")
