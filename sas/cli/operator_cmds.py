"""``sas retry | resubmit | compensate``: an operator's hand on one task, or on a selection
(``sas/cli/bulk.py``). Requests go to the workflow that answers for the task
(``sas/cli/answering.py``): its Scheduler, or its clean-up workflow once the Scheduler is closed."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import bulk, bulk_selection, context
from sas.cli.output import CliError, command_line, console, shown

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


def _operator_action(task_id: str, update: str, done: str, **request: Any) -> None:
    """Send an operator update to the workflow that answers for the task, and print its answer
    (or the rejection, as an error)."""
    from sas.cli import audit, tasks

    tasks.check_task_id(task_id)
    request["by"] = audit.actor(request.get("by"))
    operator_request = tasks.operator_request(**request)

    async def go() -> Any:
        from sas.cli.answering import answering_workflow

        client = await context.client()
        answering = await answering_workflow(client, task_id)
        return await tasks.update(client, task_id, update, operator_request, workflow_id=answering.workflow_id)

    answer = context.run(go)
    _follow_hint(task_id, f"{done}{answer.message}")


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
    from sas.cli import audit, park, tasks

    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json, incident)
    if task_id is None:
        raise typer.Exit(bulk.run("retry", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags, step_is_single=True)
    tasks.check_task_id(task_id)
    # A step parked by pausing its activity (Temporal shows it paused): unpause it. Anything
    # else goes to the workflow that answers, which accepts or rejects it with the reason.
    unparked = context.run(lambda: park.unpark(task_id, step, audit.actor(by), reason))
    if unparked is not None:
        _follow_hint(task_id, unparked)
        return
    _operator_action(task_id, "request_retry", "", step=step, by=by, reason=reason)


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
    from sas.cli import audit, tasks

    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json, incident)
    if task_id is None:
        raise typer.Exit(bulk.run("resubmit", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags)
    tasks.check_task_id(task_id)

    async def answering() -> Any:
        from sas.cli.answering import answering_workflow

        return await answering_workflow(await context.client(), task_id)

    answers = context.run(answering)
    if answers.cleanup:
        raise cleanup_running(task_id, answers.workflow_id)
    if answers.scheduler_status == "RUNNING":
        _operator_action(
            task_id, "request_retry", "FailureCount reset; ", by=by, reason=reason, reset_failure_count=True
        )
        return
    actor = audit.actor(by)
    incarnation = context.run(lambda: context.with_client(lambda c: tasks.resubmit_finished(c, task_id, actor, reason)))
    _follow_hint(task_id, f"resubmitted as incarnation {incarnation}, with new idempotency keys")


def cleanup_running(task_id: str, workflow_id: str) -> CliError:
    """Why a task whose clean-up still runs cannot be resubmitted, and what to do first."""
    return CliError(
        f"{task_id}: its clean-up {workflow_id} is still undoing it; finish it first",
        f"sas retry {task_id}   (re-run its waiting undo) or   sas compensate {task_id}",
    )


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
    _operator_action(task_id, "request_compensate", "", by=by, reason=reason, force=force)


def park(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = typer.Option(None, help="Step to park (default: the running or waiting one)."),
    by: str | None = BY,
    reason: str = REASON,
) -> None:
    """Park a task's running or waiting step as Error until `sas retry` (hung calls too)."""
    from sas.cli import audit, tasks
    from sas.cli import park as parking

    tasks.check_task_id(task_id)
    message = context.run(
        lambda: context.with_client(lambda c: parking.park_step(c, task_id, step, audit.actor(by), reason))
    )
    console.print(f"{shown(task_id)}: {shown(message)}; to resume it:")
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
    """Send the wait step's own update (``request_<signal>``: workflows/shell/waits.py) with who,
    whether and why; the workflow's validator refuses what does not apply, and says why."""
    from sas.cli import audit, tasks

    tasks.check_task_id(task_id)

    async def go() -> Any:
        from pydantic import ValidationError

        from sas.task_models import Approval, StepState, TaskStatus

        try:
            approval = Approval(step=step, approved=approved, by=audit.actor(by), reason=reason)
        except ValidationError as err:
            raise CliError("; ".join(f"--{e['loc'][0]}: {e['msg']}" for e in err.errors())) from None
        client = await context.client()
        status: TaskStatus = await client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
        waiting = [s for s in status.steps if s.state == StepState.WAITING and s.waits_for and s.name in (step, s.name)]
        waiting = [s for s in waiting if step is None or s.name == step]
        if not waiting:
            raise CliError(f"{task_id}: no step waits for an approval", f"see `sas status {task_id}`")
        if len(waiting) > 1:
            names = ", ".join(s.name for s in waiting)
            raise CliError(
                f"{task_id}: steps {names} wait for an approval: name one", f"sas approve {task_id} --step NAME"
            )
        return await tasks.update(client, task_id, f"request_{waiting[0].waits_for}", approval)

    answer = context.run(go)
    _follow_hint(task_id, answer.message)
