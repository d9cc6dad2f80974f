"""What goes into a call declared as data: where each value of its body, path, query and headers
comes from (the task's input, an earlier step's result, the forward step's result for an undo, a
constant, the task's id, the forward key), and how it is read for one ``StepCall``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sas.task_models.steps import StepCall


@dataclass(frozen=True)
class Input:
    """A field of the task's input: ``Input("traveller")``, or a nested one, ``Input("trip.from")``."""

    path: str

    def __post_init__(self) -> None:
        if not self.path or any(not part.isidentifier() for part in self.path.split(".")):
            raise ValueError(f"Input({self.path!r}): name a field of the input, e.g. 'traveller' or 'trip.date'")


@dataclass(frozen=True)
class Result:
    """A field of an earlier step's result: ``Result("flight", "booking_id")``. In a forward
    call only: an undo gets its own step's result through [`Forward`][sas.api.Forward]."""

    step: str
    field: str


@dataclass(frozen=True)
class Forward:
    """In an undo: a field of its own forward step's result (``Forward("booking_id")``), the
    service's id of the effect to undo. When the forward answer never arrived (the attempt
    timed out, the workflow died), it is asked of the service's lookup by the forward key; if
    the service did nothing under that key, the undo is not sent: that answer voided the key at
    the service, so nothing ever will be done under it (docs/http-contract.md)."""

    field: str


@dataclass(frozen=True)
class Const:
    """A fixed value: ``Const("economy")``. Any JSON value."""

    value: Any


@dataclass(frozen=True)
class TaskId:
    """The task's id."""


@dataclass(frozen=True)
class ForwardKey:
    """In an undo: the idempotency key its forward call was sent with, by which the service
    can find the effect when no id is known."""


BodyValue = Input | Result | Forward | Const | TaskId | ForwardKey


def value_of(source: BodyValue, call: StepCall, forward: Mapping[str, Any]) -> Any:
    """The value ``source`` stands for in ``call`` (``forward``: an undo's forward result)."""
    if isinstance(source, Input):
        value: Any = call.payload
        for part in source.path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return value
    if isinstance(source, Result):
        return call.results.get(source.step, {}).get(source.field)
    if isinstance(source, Forward):
        return forward.get(source.field)
    if isinstance(source, Const):
        return source.value
    if isinstance(source, TaskId):
        return call.task_id
    return call.target_key  # ForwardKey
