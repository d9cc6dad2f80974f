"""An operator's hand on one task: retry, compensate, resubmit, approve or reject.

Each request goes to the workflow that answers for the task (``answering.py``): its
Scheduler, or its clean-up workflow once the Scheduler is closed. The workflow's update
validator accepts it or refuses it with a reason, and the workflow that applies it writes its
audit entry with who asked and why (every request is audited where it is applied). A step
parked by pausing its activity (``parking.py``) is resumed by ``retry`` here, audited by us.

Each action asks Temporal once which workflow answers (``answering_workflow``: one describe
while the Scheduler runs) and works from that answer: the un-park reads its pending activities,
and a task whose workflow has finished is refused from it, with no update sent. These are the
functions a bulk action (``bulk.py``) runs for each task it selected."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from sas.client import parking
from sas.client.answering import Answering, answering_workflow
from sas.client.errors import InvalidInput, NotApplicable, TaskNotFound
from sas.client.inputs import in_words
from sas.client.store import StateStore
from sas.client.submitting import resubmit_finished
from sas.task_models import Approval, OperatorAnswer, OperatorRequest, StepState, TaskResult, TaskState, TaskStatus
from sas.task_models.ids import cleanup_workflow_id

_CLOSED_FROM_OUTSIDE = (
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
)


class NotActedOn(NotApplicable):
    """The task, as Temporal shows it, takes no such request, so it was not acted on: its
    workflow has finished, it is Processed, or its clean-up still runs. ``short`` says why in a
    few words: a bulk action counts the task ``skipped`` with it (a refusal by the workflow's
    validator is a plain ``NotApplicable``, which it counts ``failed``)."""

    def __init__(self, message: str, hint: str | None = None, *, short: str) -> None:
        super().__init__(message, hint)
        self.short = short


def operator_request(**fields: object) -> OperatorRequest:
    """An operator request (``step``, ``by``, ``reason``, ...); a bad value is refused naming its
    field, in words."""
    try:
        return OperatorRequest.model_validate(fields)
    except ValidationError as err:
        errors = err.errors()
        raise InvalidInput(
            "; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')}: {in_words(e)}" for e in errors),
            field=str(errors[0]["loc"][0]) if errors and errors[0]["loc"] else None,
        ) from None


async def update(
    client: Client, task_id: str, name: str, request: BaseModel, workflow_id: str | None = None
) -> OperatorAnswer:
    """Send an operator update to the task's Scheduler, or to ``workflow_id`` (the workflow that
    answers for the task); a rejection is NotApplicable saying why."""
    try:
        return await client.get_workflow_handle(workflow_id or task_id).execute_update(
            name, request, result_type=OperatorAnswer
        )
    except WorkflowUpdateFailedError as err:
        reason = getattr(err.cause, "message", None) or str(err.cause)
        raise NotApplicable(f"{task_id}: rejected: {reason}", f"see `sas status {task_id}`") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            if "completed" in err.message.lower():
                # It closed between our look and the update: only then is it described again.
                try:
                    described = await client.get_workflow_handle(workflow_id or task_id).describe()
                except RPCError:
                    described = None
                raise _finished(task_id, described) from None
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`") from None
        raise


def _finished(task_id: str, described: WorkflowExecutionDescription | None) -> NotActedOn:
    """Why a request finds the task's workflow closed: one it ended itself is finished; one
    closed from outside (terminated, timed out) is the Supervisor's to undo, by its clean-up."""
    status = described.status if described is not None else None
    when = described.close_time if described is not None else None
    how = (status.name.lower().replace("_", " ") if status is not None else "closed") + (
        f" at {when.isoformat(timespec='seconds')}" if when is not None else ""
    )
    if status in _CLOSED_FROM_OUTSIDE:
        return NotActedOn(
            f"{task_id}'s workflow was closed from outside sas ({status.name.lower()}): the Supervisor's clean-up"
            f" {cleanup_workflow_id(task_id)} undoes what it did, at its next sweep",
            f"see `sas status {task_id}`; once the clean-up runs, `sas retry` and `sas compensate` go to it",
            short=f"finished in Temporal ({how})",
        )
    return NotActedOn(
        f"{task_id} has already finished", f"see `sas status {task_id}`", short=f"finished in Temporal ({how})"
    )


async def send(client: Client, answers: Answering, name: str, operator: BaseModel) -> OperatorAnswer:
    """``update`` to the workflow that answers for the task, as ``answers`` found it; a task that
    no running workflow answers for is refused from that answer, with nothing sent."""
    task_id = answers.task_id
    if not answers.running:
        if answers.described is None:
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`")
        raise _finished(task_id, answers.described)
    return await update(client, task_id, name, operator, workflow_id=answers.workflow_id)


async def request(client: Client, task_id: str, name: str, operator: OperatorRequest) -> OperatorAnswer:
    """``update`` to the workflow that answers for the task now."""
    return await send(client, await answering_workflow(client, task_id), name, operator)


async def retry(client: Client, store: StateStore, task_id: str, step: str | None, by: str, reason: str) -> str:
    """Re-run the step that waits for a decision, or resume one parked by pausing its activity.
    What was done, in words."""
    operator = operator_request(step=step, by=by, reason=reason)
    answers = await answering_workflow(client, task_id)
    # A step parked by pausing its activity (Temporal shows it paused): unpause it. Anything
    # else goes to the workflow that answers, which accepts or rejects it with the reason.
    unparked = await parking.unpark(client, store, answers, step, by, reason)
    if unparked is not None:
        return unparked
    return (await send(client, answers, "request_retry", operator)).message


async def compensate(client: Client, task_id: str, by: str, reason: str, force: bool = False) -> str:
    """Undo the task's completed steps, in reverse order. ``force``: undo past a pivot step too,
    where the request model has that field (the workflow refuses it otherwise); a reason is
    then required."""
    fields: dict[str, object] = {"by": by, "reason": reason}
    if force:
        if "force" not in OperatorRequest.model_fields:
            raise InvalidInput("force: this version of sas cannot force a compensation", field="force")
        if not reason:
            raise InvalidInput("force needs a reason, for the audit log", field="reason")
        fields["force"] = True
    answers = await answering_workflow(client, task_id)
    message = (await send(client, answers, "request_compensate", operator_request(**fields))).message
    # A fan-out item paused in its batch would keep the batch, and so the undo, waiting for ever.
    # Unpaused only now that the task is compensating: its batches are told to start no more
    # items, the item's call is sent again under its own key and its undo follows with the rest.
    items = await parking.paused_items(client, answers)
    if items:
        count = await parking.unpause_items(client, items, by)
        message += f"; {count} paused fan-out items unpaused so that their batches end"
    return message


async def resubmit(client: Client, store: StateStore, task_id: str, by: str, reason: str) -> tuple[str, int | None]:
    """Run the task again: a parked one with its FailureCount reset (what was done, None), a
    finished Compensated or Error one as its next incarnation (what was done, its number)."""
    answers = await answering_workflow(client, task_id)
    if answers.cleanup:
        raise cleanup_running(task_id, answers.workflow_id)
    if answers.scheduler_status == "RUNNING":
        operator = operator_request(by=by, reason=reason, reset_failure_count=True)
        answer = await send(client, answers, "request_retry", operator)
        return f"FailureCount reset; {answer.message}", None
    if answers.scheduler_status == "COMPLETED" and answers.described is not None:
        await refuse_processed(client, task_id, answers.described)
    incarnation = await resubmit_finished(client, store, task_id, by, reason)
    return f"resubmitted as incarnation {incarnation}, with new idempotency keys", incarnation


async def refuse_processed(client: Client, task_id: str, described: WorkflowExecutionDescription) -> None:
    """A task whose workflow completed Processed is done and stays done, whatever the mirror says:
    the mirror follows Temporal, never leads it, so a row that drifted to Compensated or Error
    does not run the task again (``sas reconcile`` repairs the row)."""
    handle = client.get_workflow_handle(task_id, run_id=described.run_id, result_type=TaskResult)
    ended = await handle.result(follow_runs=False, rpc_timeout=timedelta(seconds=10))
    if ended.state == TaskState.PROCESSED:
        raise NotActedOn(
            f"{task_id} is Processed in Temporal: it is done and stays done",
            f"submit a new task under a new id; if the state store says otherwise, `sas reconcile --task {task_id}`",
            short="Processed in Temporal (done and stays done)",
        )


def cleanup_running(task_id: str, workflow_id: str) -> NotActedOn:
    """Why a task whose clean-up still runs cannot be resubmitted, and what to do first."""
    return NotActedOn(
        f"{task_id}: its clean-up {workflow_id} is still undoing it; finish it first",
        f"sas retry {task_id}   (re-run its waiting undo) or   sas compensate {task_id}",
        short=f"its clean-up {workflow_id} is still undoing it",
    )


async def answer_wait(client: Client, task_id: str, step: str | None, *, approved: bool, by: str, reason: str) -> str:
    """Approve or reject the step that waits for an approval, by its own update
    (``request_<signal>``); the workflow's validator refuses what does not apply, and says why."""
    try:
        approval = Approval(step=step, approved=approved, by=by, reason=reason)
    except ValidationError as err:
        raise InvalidInput(
            "; ".join(f"--{e['loc'][0]}: {e['msg']}" for e in err.errors()), field=str(err.errors()[0]["loc"][0])
        ) from None
    try:
        status = await client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`") from None
        raise
    waiting = [s for s in status.steps if s.state == StepState.WAITING and s.waits_for]
    waiting = [s for s in waiting if step is None or s.name == step]
    if not waiting:
        raise NotApplicable(f"{task_id}: no step waits for an approval", f"see `sas status {task_id}`")
    if len(waiting) > 1:
        names = ", ".join(s.name for s in waiting)
        raise NotApplicable(
            f"{task_id}: steps {names} wait for an approval: name one", f"sas approve {task_id} --step NAME"
        )
    return (await update(client, task_id, f"request_{waiting[0].waits_for}", approval)).message
