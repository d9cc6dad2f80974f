"""An Agent reads its whole call: the names and the input a compact call leaves out.

Two things a call's history event need not repeat, filled in here, on the Agent's worker, before
the Agent runs (and before its seal is checked, sas/runtime/activity_owners.py, since the seal is
made over the whole call):

- The input fields the submitter did not set. The Scheduler sends each Agent the fields its
  submitter set, as the task's start event already holds them (``TaskRun.call_payload``), so
  that no call repeats the defaults its input model fills in (an order's currency, card and
  parcels: a third of each call). They are filled in again from the task type's own input model:
  ``call.payload`` is the same whole input, defaults included, that the Scheduler's
  ``StepContext`` reads. A call whose type this worker does not run, an item of a fan-out (its
  payload is the item), or a payload its model refuses (the Agent says what is wrong with it, as
  before) is left as it came.
- In a compact call (a task whose plan is compact), its task id, chain and key, which are those
  of the workflow run that scheduled it (``StepCall.compact_for``): read from Temporal's activity
  info (``StepCall.whole_from``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity, worker

from sas.task_models import StepCall
from sas.task_models.sdk_internals import workflow_name_of
from sas.task_types.task_definition import definition_of


@dataclass(frozen=True)
class TaskTypes:
    """What a worker's task types give a call: each one's input model, by its name, and the
    task type each workflow runs, by its name in Temporal."""

    input_models: Mapping[str, type[BaseModel]]
    by_workflow: Mapping[str, str]


def task_types_of(workflows: Sequence[type]) -> TaskTypes:
    """The task types of the task workflows in ``workflows`` (other classes run none)."""
    models: dict[str, type[BaseModel]] = {}
    by_workflow: dict[str, str] = {}
    for cls in workflows:
        definition = definition_of(cls)
        name = workflow_name_of(cls)
        if definition is None or name is None:
            continue
        models[definition.task_type] = definition.input_model
        by_workflow[name] = definition.task_type
    return TaskTypes(models, by_workflow)


def input_models(workflows: Sequence[type]) -> Mapping[str, type[BaseModel]]:
    """Each task type's input model, by its name, of the task workflows in ``workflows``."""
    return task_types_of(workflows).input_models


def with_defaults(models: Mapping[str, type[BaseModel]], call: StepCall) -> StepCall:
    """``call`` with its input whole: the defaults of its task type's input model filled in."""
    model = models.get(call.task_type)
    if model is None or call.item_key is not None:
        return call
    try:
        whole = model.model_validate(call.payload).model_dump(mode="json")
    except ValidationError:
        return call
    return call if whole == call.payload else call.model_copy(update={"payload": whole})


def whole_call(types: TaskTypes, call: StepCall, info: activity.Info) -> StepCall:
    """``call`` as its Agent reads it: its names (a compact call's, from the activity's ``info``)
    and its task's whole input."""
    task_type = types.by_workflow.get(info.workflow_type or "", "")
    named = call.whole_from(info.workflow_id or "", info.workflow_run_id or "", task_type)
    return with_defaults(types.input_models, named)


class WholeCalls(worker.Interceptor):
    """Worker interceptor: an Agent reads its whole call (``whole_call``)."""

    def __init__(self, types: TaskTypes) -> None:
        self._types = types

    def intercept_activity(self, next: worker.ActivityInboundInterceptor) -> worker.ActivityInboundInterceptor:
        return _Inbound(next, self._types)


class _Inbound(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, types: TaskTypes) -> None:
        super().__init__(next)
        self._types = types

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        args = input.args
        if args and isinstance(args[0], StepCall):
            whole = whole_call(self._types, args[0], activity.info())
            if whole is not args[0]:
                input = dataclasses.replace(input, args=[whole, *args[1:]])
        return await super().execute_activity(input)
