"""``sas fix-input``: retry the step waiting for a decision with some of the task's input changed
(a wrong address fixed, then ship again); ``--dry-run`` checks it only."""

from __future__ import annotations

import typer

from sas.cli import acting
from sas.cli.output import console, shown


def register(app: typer.Typer) -> None:
    app.command(name="fix-input")(fix_input)


def fix_input(
    task_id: str = typer.Argument(..., help="Task id."),
    sets: list[str] = typer.Option(
        ..., "--set", help="FIELD=VALUE: a top-level input field and its new value (repeat for more)."
    ),
    step: str | None = typer.Option(None, help="The step waiting for a decision (default: the only one)."),
    force: bool = typer.Option(False, help="Past the task's point of no return too (with --reason)."),
    dry_run: bool = typer.Option(False, help="Check it with the Scheduler; change nothing."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Retry a step with a changed input (audited; every call from then on gets it)."""
    from sas.cli.task_input import parse_sets, value_of

    parsed = parse_sets(sets)
    nested = [".".join(path) for path in parsed if len(path) > 1]
    if nested:
        raise typer.BadParameter(f"{nested[0]}: a top-level field, given whole", param_hint="--set")
    fields = {path[0]: value_of(text) for path, text in parsed.items()}
    said = acting.act(
        task_id,
        by,
        reason,
        lambda c, who: c.retry_with_input(
            task_id, fields, step=step, by=who, reason=reason, force=force, dry_run=dry_run
        ),
    )
    console.print(f"{shown(task_id)}: {shown(said)}")
    if not dry_run:
        acting.follow_hint(task_id, "the step is retried with the new input")
