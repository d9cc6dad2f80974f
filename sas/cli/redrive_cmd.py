"""``sas redrive``: run a task finished in Error again from a step, keeping the steps before it
done (their results and idempotency keys); ``--dry-run`` says what would be kept."""

from __future__ import annotations

import typer

from sas.cli import acting
from sas.cli.output import console, shown


def register(app: typer.Typer) -> None:
    app.command()(redrive)


def redrive(
    task_id: str = typer.Argument(..., help="Task id of a task finished in Error."),
    from_step: str = typer.Option(..., "--from", help="The step to run again from; the stages before it are kept."),
    force: bool = typer.Option(False, help="Run a done pivot again too (with --reason)."),
    dry_run: bool = typer.Option(False, help="Say what would be kept and run again; start nothing."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Run a task finished in Error again from a step, keeping what was done before it (audited)."""
    done = acting.act(
        task_id,
        by,
        reason,
        lambda c, who: c.redrive(task_id, from_step, by=who, reason=reason, force=force, dry_run=dry_run),
    )
    console.print(f"{shown(task_id)}: {shown(done.message)}")
    if not dry_run:
        acting.follow_hint(task_id, "the new incarnation runs")
