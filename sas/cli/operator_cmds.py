"""``sas retry | resubmit | compensate | park | approve | reject``: an operator's hand on one
task, through the task client (``sas.client``: requests go to the workflow that answers for the
task, its Scheduler or its clean-up), or on a selection (``sas/cli/bulk.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import typer

from sas.cli import bulk, bulk_selection, context
from sas.cli.output import CliError, command_line, console, shown

if TYPE_CHECKING:
    from sas.client.task_client import TaskClient

BY = typer.Option(None, help="Who is acting (default: $USER).")
REASON = typer.Option("", help="Why, for the record.")
# Bulk actions (sas/cli/bulk.py): no task id, a selection instead; --dry-run lists, --yes acts.
TASK_ID = typer.Argument(None, help="Task id; or none, and select tasks with the options below.")


def register(app: typer.Typer) -> None:
    app.command()(retry)
    app.command()(resubmit)
    app.command()(compensate)
    app.command()(park)
    app.command()(approve)
    app.command()(reject)


def _follow_hint(task_id: str, said: str) -> None:
    console.print(f"{shown(task_id)}: {shown(said)}; follow it with:")
    command_line(f"  sas status {task_id} --follow")


def _act(task_id: str, by: str | None, reason: str, action: Callable[[TaskClient, str], Awaitable[Any]]) -> Any:
    """Check the id, who and why as typed, then run ``action`` (given the task client and the
    actor) on the task client, whose typed errors ``main`` prints as one line."""
    from sas.cli import audit, tasks

    tasks.check_task_id(task_id)
    who = audit.actor(by)
    audit.check_reason(reason)

    async def go() -> Any:
        return await action(await context.task_client(), who)

    return context.run(go)


def retry(
    task_id: str | None = TASK_ID,
    step: str | None = typer.Option(None, help="Step to retry (default: the one waiting); or select tasks at it."),
    by: str | None = BY,
    reason: str = REASON,
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
    done = _act(task_id, by, reason, lambda c, who: c.retry(task_id, step=step, by=who, reason=reason))
    _follow_hint(task_id, done.message)


def resubmit(
    task_id: str | None = TASK_ID,
    by: str | None = BY,
    reason: str = REASON,
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
    done = _act(task_id, by, reason, lambda c, who: c.resubmit(task_id, by=who, reason=reason))
    _follow_hint(task_id, done.message)


def compensate(
    task_id: str | None = TASK_ID,
    by: str | None = BY,
    reason: str = REASON,
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
    done = _act(task_id, by, reason, lambda c, who: c.compensate(task_id, by=who, reason=reason, force=force))
    _follow_hint(task_id, done.message)


def park(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = typer.Option(None, help="Step to park (default: the running or waiting one)."),
    by: str | None = BY,
    reason: str = REASON,
) -> None:
    """Park a task's running or waiting step as Error until `sas retry` (hung calls too)."""
    done = _act(task_id, by, reason, lambda c, who: c.park(task_id, step=step, by=who, reason=reason))
    console.print(f"{shown(task_id)}: {shown(done.message)}; to resume it:")
    command_line(f"  sas retry {task_id}")


WAIT_STEP = typer.Option(None, help="The wait step (default: the one waiting).")


def approve(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = WAIT_STEP,
    by: str | None = BY,
    reason: str = REASON,
) -> None:
    """Approve a task's step that waits for an approval: the task goes on."""
    _answer_wait(task_id, step, approved=True, by=by, reason=reason)


def reject(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = WAIT_STEP,
    by: str | None = BY,
    reason: str = REASON,
) -> None:
    """Reject a task's step that waits for an approval: the task is undone."""
    _answer_wait(task_id, step, approved=False, by=by, reason=reason)


def _answer_wait(task_id: str, step: str | None, *, approved: bool, by: str | None, reason: str) -> None:
    """The wait step's own update with who, whether and why (``sas.client.operator.answer_wait``)."""
    verdict = "approve" if approved else "reject"
    done = _act(task_id, by, reason, lambda c, who: getattr(c, verdict)(task_id, step=step, by=who, reason=reason))
    _follow_hint(task_id, done.message)
