"""``sas skip``: skip a failed step its task type declares skippable, so the task goes on without
it (its undo is never called); ``--dry-run`` checks it only."""

from __future__ import annotations

import typer

from sas.cli import acting
from sas.cli.output import console, shown


def register(app: typer.Typer) -> None:
    app.command()(skip)


def skip(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str = typer.Option(..., help="The step waiting for a decision (its type declares it skippable)."),
    force: bool = typer.Option(False, help="Past the task's point of no return too (with --reason)."),
    dry_run: bool = typer.Option(False, help="Check it with the Scheduler; change nothing."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Skip a failed step the task can do without (audited; the task goes on, its undo is never run)."""
    said = acting.act(
        task_id,
        by,
        reason,
        lambda c, who: c.skip_step(task_id, step, by=who, reason=reason, force=force, dry_run=dry_run),
    )
    console.print(f"{shown(task_id)}: {shown(said)}")
    if not dry_run:
        acting.follow_hint(task_id, "the task goes on without it")
