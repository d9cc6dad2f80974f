"""An operator's repairs of one task, sent to its Scheduler: a step completed by hand, a step
retried with a changed input, a step skipped.

Each is an update the Scheduler validates (``request_complete``, ``request_retry_with_input``,
``request_skip``, ``workflows/shell/operator.py``) and audits; a dry run asks the same checks
through a query (``check_complete``, ``check_retry_with_input``, ``check_skip``), which Temporal
records nowhere, so it changes nothing. Never a write to the mirror."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sas.client.errors import InvalidInput, NotApplicable, TaskNotFound
from sas.client.operator import update
from sas.task_models import OperatorAnswer
from sas.task_models.repairs import InputChange, Repair, StepCompletion, StepSkip

_Asked = TypeVar("_Asked", bound=Repair)


def completion(step: str, result: Mapping[str, Any], by: str, reason: str, *, force: bool = False) -> StepCompletion:
    """The completion as the Scheduler takes it; InvalidInput naming what is wrong."""
    asked = {"step": step, "result": dict(result), "by": by, "reason": reason, "force": force}
    return _checked(StepCompletion, asked, "completing a step by hand", f"cannot complete step {step!r} by hand")


def input_change(
    step: str | None, fields: Mapping[str, Any], by: str, reason: str, *, force: bool = False
) -> InputChange:
    """The input change as the Scheduler takes it; InvalidInput naming what is wrong."""
    asked = {"step": step, "fields": dict(fields), "by": by, "reason": reason, "force": force}
    return _checked(InputChange, asked, "changing a task's input", "cannot change the input")


def step_skip(step: str, by: str, reason: str, *, force: bool = False) -> StepSkip:
    """The skip as the Scheduler takes it; InvalidInput naming what is wrong."""
    asked = {"step": step, "by": by, "reason": reason, "force": force}
    return _checked(StepSkip, asked, "skipping a step", f"cannot skip step {step!r}")


def require_reason(reason: str, doing: str) -> None:
    """Every repair says why: InvalidInput for an empty reason."""
    if not reason.strip():
        raise InvalidInput(f"{doing} needs a reason (--reason): it is kept in the audit log")


def _checked(model: type[_Asked], asked: dict[str, Any], doing: str, cannot: str) -> _Asked:
    """One repair's payload, checked before Temporal is asked: a reason, and the model's bounds."""
    require_reason(str(asked["reason"]), doing)
    try:
        return model(**asked)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False)[:3])
        raise InvalidInput(f"{cannot}: {problems}") from None


async def complete_step(client: Client, task_id: str, done: StepCompletion, *, dry_run: bool = False) -> str:
    """Complete ``done.step`` of the task by hand, or (``dry_run``) say what would be done.

    Returns what was (or would be) done; NotApplicable saying why the Scheduler refuses."""
    would = f"would complete step {done.step} by hand (dry run: nothing changed)"
    return await _repair(client, task_id, "complete", done, would, dry_run=dry_run)


async def retry_with_input(client: Client, task_id: str, change: InputChange, *, dry_run: bool = False) -> str:
    """Retry the waiting step with ``change.fields`` of the task's input changed, or
    (``dry_run``) say what would be done. NotApplicable saying why the Scheduler refuses."""
    fields = ", ".join(sorted(change.fields))
    would = f"would retry {'step ' + change.step if change.step else 'the waiting step'} with {fields} changed"
    return await _repair(
        client, task_id, "retry_with_input", change, f"{would} (dry run: nothing changed)", dry_run=dry_run
    )


async def skip_step(client: Client, task_id: str, skip: StepSkip, *, dry_run: bool = False) -> str:
    """Skip ``skip.step`` of the task (its type lets it be skipped), or (``dry_run``) say what
    would be done. NotApplicable saying why the Scheduler refuses."""
    would = f"would skip step {skip.step} (dry run: nothing changed)"
    return await _repair(client, task_id, "skip", skip, would, dry_run=dry_run)


async def _repair(client: Client, task_id: str, kind: str, asked: Any, would: str, *, dry_run: bool) -> str:
    """One repair: its update (``request_<kind>``), or its dry run (the ``check_<kind>`` query)."""
    if not dry_run:
        answer: OperatorAnswer = await update(client, task_id, f"request_{kind}", asked)
        return answer.message
    try:
        problem = await client.get_workflow_handle(task_id).query(f"check_{kind}", asked, result_type=str)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`") from None
        raise
    if problem:
        raise NotApplicable(f"{task_id}: would be rejected: {problem}", f"see `sas status {task_id}`")
    return would
