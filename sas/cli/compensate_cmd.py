"""``sas compensate``: undo a task's completed steps in reverse order, for one task or a selection
(``sas/cli/bulk.py``); ``--force`` undoes one task past its pivot, audited."""

from __future__ import annotations

import typer

from sas.cli import acting, bulk, bulk_selection
from sas.cli.output import CliError


def register(app: typer.Typer) -> None:
    app.command()(compensate)


def compensate(
    task_id: str | None = acting.TASK_ID,
    by: str | None = acting.BY,
    reason: str = acting.REASON,
    state: list[str] | None = bulk_selection.STATE,
    step: str | None = bulk_selection.STEP,
    since: str | None = bulk_selection.SINCE,
    task_type: str | None = bulk_selection.TASK_TYPE,
    query: str | None = bulk_selection.QUERY,
    limit: int = bulk_selection.LIMIT,
    concurrency: int = bulk.CONCURRENCY,
    dry_run: bool = bulk.DRY_RUN,
    yes: bool = bulk.YES,
    as_json: bool = bulk.JSON,
    incident: int | None = bulk_selection.INCIDENT,
    force: bool = typer.Option(
        False, "--force", help="Undo a task past its pivot (its point of no return): one task, with --reason; audited."
    ),
) -> None:
    """Ask a task (or a selection) to undo its completed steps, in reverse order."""
    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json, incident)
    if force and task_id is None:
        raise CliError("--force undoes one task past its point of no return: give its id", code=2)
    if force and not reason.strip():
        raise CliError("--force needs --reason: say why the task is undone past its point of no return", code=2)
    if task_id is None:
        raise typer.Exit(bulk.run("compensate", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags)
    # The workflow decides whether the task is past its pivot and audits the forced undo
    # (workflows/core/requests.py): the same rule for the UI's signal and any other client.
    done = acting.act(task_id, by, reason, lambda c, who: c.compensate(task_id, by=who, reason=reason, force=force))
    acting.follow_hint(task_id, done.message)
