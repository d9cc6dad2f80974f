"""An Agent reads the task's whole input: its call carries only what the submitter gave.

The Scheduler sends each Agent's ``StepCall`` the input fields its submitter set, as the
task's start event already holds them (``TaskRun.call_payload``), so that no call's history
event repeats the defaults its input model fills in (an order's currency, card and parcels: a
third of each call). This interceptor fills them in again, from the task type's own input
model, before the Agent runs: ``call.payload`` is the same whole input, defaults included, that
the Scheduler's ``StepContext`` reads. A call whose type this worker does not run, an item of a
fan-out (its payload is the item), or a payload its model refuses (the Agent says what is wrong
with it, as before) is left as it came.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import worker

from sas.task_models import StepCall
from sas.task_types.task_definition import definition_of


def input_models(workflows: Sequence[type]) -> dict[str, type[BaseModel]]:
    """Each task type's input model, by its name, of the task workflows in ``workflows``."""
    found = (definition_of(cls) for cls in workflows)
    return {d.task_type: d.input_model for d in found if d is not None}


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


class CallInputs(worker.Interceptor):
    """Worker interceptor: an Agent's call is given the task's whole input (``with_defaults``)."""

    def __init__(self, models: Mapping[str, type[BaseModel]]) -> None:
        self._models = models

    def intercept_activity(self, next: worker.ActivityInboundInterceptor) -> worker.ActivityInboundInterceptor:
        return _Inbound(next, self._models)


class _Inbound(worker.ActivityInboundInterceptor):
    def __init__(self, next: worker.ActivityInboundInterceptor, models: Mapping[str, type[BaseModel]]) -> None:
        super().__init__(next)
        self._models = models

    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        args = input.args
        if args and isinstance(args[0], StepCall):
            whole = with_defaults(self._models, args[0])
            if whole is not args[0]:
                input = dataclasses.replace(input, args=[whole, *args[1:]])
        return await super().execute_activity(input)
