"""``sas resubmit``: run a task again - a parked one from FailureCount 0, a finished one as its
next incarnation - for one task or a selection (``sas/cli/bulk.py``)."""

from __future__ import annotations

import typer

from sas.cli import acting, bulk, bulk_selection


def register(app: typer.Typer) -> None:
    app.command()(resubmit)


def resubmit(
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
) -> None:
    """Run a task (or a selection) again: a parked one with FailureCount 0, a finished one as a new incarnation."""
    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json, incident)
    if task_id is None:
        raise typer.Exit(bulk.run("resubmit", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags)
    done = acting.act(task_id, by, reason, lambda c, who: c.resubmit(task_id, by=who, reason=reason))
    acting.follow_hint(task_id, done.message)
