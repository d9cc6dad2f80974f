"""An operator's hand on one task: retry, compensate, resubmit, approve or reject.

Each request goes to the workflow that answers for the task (``answering.py``): its
Scheduler, or its clean-up workflow once the Scheduler is closed. The workflow's update
validator accepts it or refuses it with a reason, and the workflow that applies it writes its
audit entry with who asked and why (every request is audited where it is applied). A step
parked by pausing its activity (``parking.py``) is resumed by ``retry`` here, audited by us."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from sas.client import parking
from sas.client.answering import answering_workflow
from sas.client.errors import InvalidInput, NotApplicable, TaskNotFound
from sas.client.inputs import in_words
from sas.client.store import StateStore
from sas.client.submitting import resubmit_finished
from sas.task_models import Approval, OperatorAnswer, OperatorRequest, StepState, TaskStatus
from sas.task_models.ids import cleanup_workflow_id

_CLOSED_FROM_OUTSIDE = (
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
)


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
                raise await _finished(client, task_id, workflow_id or task_id) from None
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`") from None
        raise


async def _finished(client: Client, task_id: str, workflow_id: str) -> NotApplicable:
    """Why a request found the task's workflow closed: one it ended itself is finished; one
    closed from outside (terminated, timed out) is the Supervisor's to undo, by its clean-up."""
    try:
        status = (await client.get_workflow_handle(workflow_id).describe()).status
    except RPCError:
        status = None
    if status in _CLOSED_FROM_OUTSIDE:
        return NotApplicable(
            f"{task_id}'s workflow was closed from outside sas ({status.name.lower()}): the Supervisor's clean-up"
            f" {cleanup_workflow_id(task_id)} undoes what it did, at its next sweep",
            f"see `sas status {task_id}`; once the clean-up runs, `sas retry` and `sas compensate` go to it",
        )
    return NotApplicable(f"{task_id} has already finished", f"see `sas status {task_id}`")


async def request(client: Client, task_id: str, name: str, operator: OperatorRequest) -> OperatorAnswer:
    """``update`` to the workflow that answers for the task now."""
    answering = await answering_workflow(client, task_id)
    return await update(client, task_id, name, operator, workflow_id=answering.workflow_id)


async def retry(client: Client, store: StateStore, task_id: str, step: str | None, by: str, reason: str) -> str:
    """Re-run the step that waits for a decision, or resume one parked by pausing its activity.
    What was done, in words."""
    operator = operator_request(step=step, by=by, reason=reason)
    # A step parked by pausing its activity (Temporal shows it paused): unpause it. Anything
    # else goes to the workflow that answers, which accepts or rejects it with the reason.
    unparked = await parking.unpark(client, store, task_id, step, by, reason)
    if unparked is not None:
        return unparked
    return (await request(client, task_id, "request_retry", operator)).message


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
    return (await request(client, task_id, "request_compensate", operator_request(**fields))).message


async def resubmit(client: Client, store: StateStore, task_id: str, by: str, reason: str) -> tuple[str, int | None]:
    """Run the task again: a parked one with its FailureCount reset (what was done, None), a
    finished Compensated or Error one as its next incarnation (what was done, its number)."""
    answers = await answering_workflow(client, task_id)
    if answers.cleanup:
        raise cleanup_running(task_id, answers.workflow_id)
    if answers.scheduler_status == "RUNNING":
        operator = operator_request(by=by, reason=reason, reset_failure_count=True)
        answer = await update(client, task_id, "request_retry", operator, workflow_id=answers.workflow_id)
        return f"FailureCount reset; {answer.message}", None
    incarnation = await resubmit_finished(client, store, task_id, by, reason)
    return f"resubmitted as incarnation {incarnation}, with new idempotency keys", incarnation


def cleanup_running(task_id: str, workflow_id: str) -> NotApplicable:
    """Why a task whose clean-up still runs cannot be resubmitted, and what to do first."""
    return NotApplicable(
        f"{task_id}: its clean-up {workflow_id} is still undoing it; finish it first",
        f"sas retry {task_id}   (re-run its waiting undo) or   sas compensate {task_id}",
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
