"""An operator's redrive of a task finished in Error (``sas redrive``): its next incarnation, run
again from one step, keeping the steps before it done.

A task finishes in Error when its workflow was closed from outside past its point of no return
(nothing may be undone, so nothing was), or when its clean-up could not undo it. Resubmitting
it would run every step again under new keys, taking a payment twice. A redrive keeps what was
done: the steps of the stages before ``from_step`` are not called again, their results are
read by the steps after them and their undo names them, under the keys their effects were made
with (``sas.state_store.redrive``). Like Step Functions' redrive, for a sas task.

Checked here first (the task's state, the step, what can be kept), then by the Scheduler
before its accept, and by the accept itself under the task row's lock, which audits it.
``dry_run`` says what would be kept and what would run again, and starts nothing."""

from __future__ import annotations

from temporalio.client import Client

from sas.client.answering import answering_workflow
from sas.client.errors import InvalidInput, NotApplicable, TaskNotFound
from sas.client.operator import cleanup_running, refuse_processed
from sas.client.store import StateStore
from sas.client.submitting import resubmit_finished
from sas.task_models import TaskState
from sas.workflows.core.redrive import redrive_refused
from sas.workflows.registry import by_workflow_name


async def redrive(
    client: Client,
    store: StateStore,
    task_id: str,
    from_step: str,
    by: str,
    reason: str,
    *,
    force: bool = False,
    dry_run: bool = False,
) -> tuple[str, int | None]:
    """Redrive the task from ``from_step``: what was (or would be) done, and the new incarnation
    (None for a dry run). NotApplicable saying why it cannot be."""
    from sas.state_store.queries import get_task
    from sas.state_store.redrive import redrive as plan_redrive

    answers = await answering_workflow(client, task_id)
    if answers.cleanup:
        raise cleanup_running(task_id, answers.workflow_id)
    if answers.scheduler_status == "RUNNING":
        raise NotApplicable(
            f"{task_id} is still running: a redrive is for a task finished in Error",
            f"its waiting step takes `sas retry`, `sas fix-input`, `sas complete` or `sas skip`; see `sas show {task_id}`",
        )
    if answers.scheduler_status == "COMPLETED" and answers.described is not None:
        await refuse_processed(client, task_id, answers.described)
    record = await store.read(lambda s: get_task(s, task_id))
    if record is None:
        raise TaskNotFound(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    task = record.task
    if task.state != TaskState.ERROR:
        raise NotApplicable(
            f"{task_id} is {task.state}: only a task finished in Error is redriven",
            "`sas resubmit` runs a Compensated task again" if task.state == TaskState.COMPENSATED else None,
        )
    registered = by_workflow_name(task.workflow_type)
    if registered is None:
        raise NotApplicable(
            f"{task_id}'s workflow type {task.workflow_type} is not a task type of this deployment",
            "run this from where the type's package is installed",
        )
    definition = registered.definition
    refused = redrive_refused(definition, from_step)
    if refused is not None:
        raise InvalidInput(f"cannot redrive {task_id}: {refused}", field="from_step")
    planned = plan_redrive(definition.step_plans(task_id), record.steps, from_step, task.incarnation + 1, force=force)
    if isinstance(planned, str):
        raise NotApplicable(f"cannot redrive {task_id}: {planned}", f"see `sas show {task_id}`")
    kept = [k.name for k in planned[0]]
    again = [s.name for s in definition.steps if s.name not in kept]
    said = f"kept {', '.join(kept) or 'no step'}; {', '.join(again)} run again"
    if dry_run:
        return f"would redrive from {from_step}: {said} (dry run: nothing changed)", None
    incarnation = await resubmit_finished(client, store, task_id, by, reason, from_step=from_step, force=force)
    return f"redriven from {from_step} as incarnation {incarnation}: {said}", incarnation
