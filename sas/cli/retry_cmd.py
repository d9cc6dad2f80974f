"""``sas retry``: re-run the step a task waits at (or was parked at), for one task or a
selection (``sas/cli/bulk.py``)."""

from __future__ import annotations

import typer

from sas.cli import acting, bulk, bulk_selection


def register(app: typer.Typer) -> None:
    app.command()(retry)


def retry(
    task_id: str | None = acting.TASK_ID,
    step: str | None = typer.Option(None, help="Step to retry (default: the one waiting); or select tasks at it."),
    by: str | None = acting.BY,
    reason: str = acting.REASON,
    state: list[str] | None = bulk_selection.STATE,
    since: str | None = bulk_selection.SINCE,
    task_type: str | None = bulk_selection.TASK_TYPE,
    query: str | None = bulk_selection.QUERY,
    limit: int = bulk_selection.LIMIT,
    concurrency: int = bulk.CONCURRENCY,
    dry_run: bool = bulk.DRY_RUN,
    yes: bool = bulk.YES,
    as_json: bool = bulk.JSON,
    incident: int | None = bulk_selection.INCIDENT,
) -> None:
    """Ask a task (or a selection) to re-run the step that waits for a decision (or was parked by `sas park`)."""
    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json, incident)
    if task_id is None:
        raise typer.Exit(bulk.run("retry", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags, step_is_single=True)
    done = acting.act(task_id, by, reason, lambda c, who: c.retry(task_id, step=step, by=who, reason=reason))
    acting.follow_hint(task_id, done.message)
