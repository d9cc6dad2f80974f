"""``sas complete``: complete a step waiting for a decision by hand, with the result its service
would have answered (the payment was taken over the phone); ``--dry-run`` checks it only."""

from __future__ import annotations

import typer

from sas.cli import acting
from sas.cli.output import console, shown


def register(app: typer.Typer) -> None:
    app.command()(complete)


def complete(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str = typer.Option(..., help="The step waiting for a decision."),
    result: str = typer.Option(..., help="Its result as JSON, as the step's result model reads it."),
    force: bool = typer.Option(False, help="Past the task's point of no return too (with --reason)."),
    dry_run: bool = typer.Option(False, help="Check it with the Scheduler; change nothing."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Complete a step by hand with its result (audited; the task goes on from it)."""
    from sas.task_models.strict_json import loads_strict

    try:
        given = loads_strict(result)
    except ValueError as err:
        raise typer.BadParameter(f"not JSON: {err}", param_hint="--result") from None
    if not isinstance(given, dict):
        raise typer.BadParameter("a JSON object: the step's result", param_hint="--result")
    said = acting.act(
        task_id,
        by,
        reason,
        lambda c, who: c.complete_step(task_id, step, given, by=who, reason=reason, force=force, dry_run=dry_run),
    )
    console.print(f"{shown(task_id)}: {shown(said)}")
    if not dry_run:
        acting.follow_hint(task_id, "the task goes on from it")
