"""The calls a task type declares, checked before it runs: each undo on its step's service, and
every value a call sends taken from where it can come (``Input`` from the task's input model,
``Result`` from a step finished before - in a branch, one before it in its branch too - ``Forward`` only in an undo, from its step's result; a fan-out's calls read their item, never a ``Result``), and
the results a hand-written Agent says it reads (``reads=``) from such steps too."""

from __future__ import annotations

from sas.task_models.activity_defs import agent_result
from sas.task_models.queues import service_of
from sas.task_types.fan_out import ForEach
from sas.task_types.services import HttpCall
from sas.task_types.sources import Forward, ForwardKey, Input, Result
from sas.task_types.steps import StepDefinition
from sas.task_types.task_definition import TaskDefinition


def calls_problem(definition: TaskDefinition) -> str | None:
    """What is wrong with the calls the definition declares, or None: an undo on another service
    than its step's, or a value sent from where it cannot come."""
    for step in definition.steps:
        if not isinstance(step, StepDefinition):
            continue  # a wait or a child step declares no call
        forward_service = service_of(step.agent)
        if step.undo is not None and step.compensation is not None and service_of(step.compensation) != forward_service:
            return (
                f"step {step.name!r} is undone on service {service_of(step.compensation)!r} but runs on"
                f" {forward_service!r}; an undo runs where its step does, so declare it on {forward_service!r}"
            )
        reads = step.reads
        if reads is not None and not isinstance(step.forward, HttpCall):
            unknown = sorted(reads - definition.finished_before(step.name))
            if unknown:
                return (
                    f"step {step.name!r}: its Agent {step.agent} reads {unknown[0]!r}, which is not a step"
                    " that finishes before this one starts (Service.action's reads=)"
                )
        if isinstance(step.forward, HttpCall):
            for part, key, value in _sources(step.forward):
                if isinstance(step, ForEach) and isinstance(value, Result):
                    return (
                        f"fan-out step {step.name!r}, {part}[{key!r}]: Result({value.step!r}, ...) is not given to"
                        " an item's call; put what an item needs in the item (ForEach's items=...)"
                    )
                if isinstance(value, Forward | ForwardKey):
                    return f"step {step.name!r}, {part}[{key!r}]: {type(value).__name__} is for an undo only"
                if isinstance(value, Result) and value.step not in definition.finished_before(step.name):
                    return (
                        f"step {step.name!r}, {part}[{key!r}]: Result({value.step!r}, ...) must name a step"
                        " that finishes before this one starts"
                    )
                problem = _value_problem(step, f"{part}[{key!r}]", value, definition)
                if problem:
                    return problem
        if isinstance(step.undo, HttpCall):
            forward_result = agent_result(step.agent)
            for part, key, value in _sources(step.undo):
                if isinstance(value, Result):
                    return (
                        f"the undo of {step.name!r}, {part}[{key!r}]: an undo gets its own step's result"
                        f" through Forward({value.field!r}), not Result"
                    )
                if (
                    isinstance(value, Forward)
                    and forward_result is not None
                    and value.field not in forward_result.model_fields
                ):
                    return (
                        f"the undo of {step.name!r}, {part}[{key!r}]: Forward({value.field!r}) is not a field"
                        f" of {forward_result.__name__}"
                    )
                problem = _value_problem(step, f"{part}[{key!r}]", value, definition)
                if problem:
                    return problem
    return None


def _sources(call: HttpCall) -> list[tuple[str, str, object]]:
    """Every value a declared call sends, with where it goes (body, params, query, headers)."""
    return [(part, key, value) for part, values in call.sources().items() for key, value in values.items()]


def _value_problem(step: StepDefinition, place: str, value: object, definition: TaskDefinition) -> str | None:
    # A fan-out's item call is given its item as its input: its fields are the items' own.
    return None if isinstance(step, ForEach) else _input_problem(step.name, place, value, definition)


def _input_problem(step: str, place: str, value: object, definition: TaskDefinition) -> str | None:
    if not isinstance(value, Input):
        return None
    first = value.path.split(".")[0]
    if first not in definition.input_model.model_fields:
        return f"step {step!r}, {place}: Input({value.path!r}) is not a field of {definition.input_model.__name__}"
    return None
