"""What a task is started with, checked before anything is sent: its type, its input (validated
by the type's model, its callback URL against the outbound policy), its id, its priority and
its start delay. A refusal is an ``InvalidInput`` that says, in words, what is allowed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from sas.client.errors import InvalidInput
from sas.task_models import validate_task_id
from sas.task_models.outbound import OutboundPolicy, outbound_context

if TYPE_CHECKING:
    from temporalio.common import Priority

    from sas.workflows.definitions import TaskDefinition

# The task types' registry (and with it Temporal's SDK and every registered package) is imported
# when a type is first looked up, not with this module: the operator commands that only check a
# task id (`sas show`, `sas status`, `sas retry`...) never load it.


class _TaskTypes(Mapping[str, "tuple[TaskDefinition, str]"]):
    """Task type -> (its definition, its workflow type name): the registry's, read each time it
    is looked at (a copy made at import would miss a type registered since)."""

    def __getitem__(self, name: str) -> tuple[TaskDefinition, str]:
        from sas.workflows.registry import task_types

        found = task_types()[name]
        return found.definition, found.workflow_name

    def __iter__(self) -> Iterator[str]:
        from sas.workflows.registry import task_types

        return iter(task_types())

    def __len__(self) -> int:
        from sas.workflows.registry import task_types

        return len(task_types())


TASK_TYPES: Mapping[str, tuple[TaskDefinition, str]] = _TaskTypes()

# What a pattern of the input models allows, in words (a raw regex tells a user little).
PATTERN_WORDS = {
    r"^[\x20-\x7e]+$": "printable ASCII only (letters, digits, spaces and punctuation)",
    r"^[\x21-\x7e]+$": "printable ASCII without spaces",
    r"^[A-Za-z0-9._-]+$": "letters, digits, '.', '_' and '-' only",
    r"^[A-Z]{3}$": "a three-letter currency code in capitals, e.g. EUR",
    r"^[0-9]{12,19}$": "a card number of 12 to 19 digits, without spaces",
    r"^[0-9]+$": "digits only",
}


def in_words(error: Any) -> str:
    """A pydantic error as a person reads it: what is allowed, never a raw regex."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    if kind == "string_pattern_mismatch":
        return "must be " + PATTERN_WORDS.get(str(ctx.get("pattern")), "in the documented form (see --help)")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "not a field of this task type"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def unknown_task_type(task_type: str) -> InvalidInput:
    return InvalidInput(
        f"unknown task type {task_type!r}",
        f"use one of: {', '.join(TASK_TYPES) or 'none registered'} (`sas types` lists them; a package"
        " registers its own through the sas.task_types entry point group)",
        field="task_type",
    )


def definition(task_type: str) -> TaskDefinition:
    """The registered type's definition; InvalidInput naming the registered ones if there is none."""
    if task_type not in TASK_TYPES:
        raise unknown_task_type(task_type)
    return TASK_TYPES[task_type][0]


def validate_input(task_type: str, data: BaseModel | Mapping[str, Any], outbound: OutboundPolicy) -> dict[str, Any]:
    """The task input as it travels (JSON-ready), validated by the type's model and its callback
    URL against ``outbound``. A model instance is validated again, as a dict would be: the
    outbound policy is the deployment's, which the instance's maker may not have applied.

    What travels is standard JSON, by the rule every path in keeps (``json_problems``): a NaN or
    an infinity is refused naming its field, whether it was given (a model would dump an infinity
    inside a dict as ``null``) or the model made it (a float field reads the text ``"NaN"``).

    Only the fields given travel (``given_fields``: those set, and those a default factory made);
    every other field takes the type's default where the input is read, as it always has for an
    input started as a dict, so no task's history repeats the defaults."""
    from sas.workflows.inputs import given_fields, json_problems

    model = definition(task_type).input_model
    if problems := json_problems(data.model_dump() if isinstance(data, BaseModel) else data, loose=True):
        raise _invalid(task_type, problems)
    raw = data.model_dump(mode="json", include=set(given_fields(data))) if isinstance(data, BaseModel) else dict(data)
    try:
        validated = model.model_validate(raw, context=outbound_context(outbound))
    except ValidationError as err:
        raise _invalid(task_type, [(tuple(e["loc"]), in_words(e)) for e in err.errors(include_input=False)]) from None
    if problems := json_problems(validated.model_dump(mode="json")):
        raise _invalid(task_type, problems)
    return validated.model_dump(mode="json", include=set(given_fields(validated)))


def _invalid(task_type: str, problems: list[tuple[tuple[int | str, ...], str]]) -> InvalidInput:
    """InvalidInput listing each field and what is wrong with it."""
    listed = "\n".join(f"  {'.'.join(map(str, loc)) or 'input'!r}: {why}" for loc, why in problems)
    return InvalidInput(f"invalid {task_type}:\n{listed}", "fix the values above", field="payload", problems=problems)


def new_task_id(task_type: str) -> str:
    """A fresh id for a task of ``task_type``: ``<type>-<12 hex digits>``."""
    return f"{task_type}-{uuid.uuid4().hex[:12]}"


def check_task_id(task_id: str, name: str = "task_id") -> str:
    """The id, or InvalidInput saying what a task id may hold."""
    try:
        return validate_task_id(task_id)
    except ValueError as err:
        raise InvalidInput(str(err), field=name.lstrip("-")) from None


def check_step_name(step: str, name: str = "from_step") -> str:
    """The step's name, or InvalidInput saying what a step name may hold."""
    from sas.task_types.names import check_step_name as check

    try:
        check(step)
    except ValueError as err:
        raise InvalidInput(str(err), field=name) from None
    return step


# Temporal's task priority keys: 1 goes first, 5 last; a task given none runs at the server's
# default (3). Activities inherit their workflow's priority, so every step of the task has it.
PRIORITY_RANGE = (1, 5)


def check_priority(priority: int | None, name: str = "priority") -> Priority:
    """Temporal's task priority for 1 (most urgent) to 5 (least); None is the server's default."""
    from temporalio.common import Priority

    if priority is None:
        return Priority.default
    low, high = PRIORITY_RANGE
    if not low <= priority <= high:
        raise InvalidInput(f"{name} must be {low} (most urgent) to {high} (least), got {priority}", field="priority")
    return Priority(priority_key=priority)


# A start further off than this is almost surely a typo (a year for a month); Temporal would
# hold the workflow, and its input, all that time.
MAX_START_DELAY = timedelta(days=366)


def check_delay(delay: timedelta | None, what: str = "delay") -> timedelta | None:
    """A start delay after now and at most ``MAX_START_DELAY`` ahead; None or zero: start now."""
    if not delay:
        return None
    if delay.total_seconds() <= 0:
        raise InvalidInput(f"{what} is in the past", "give a time to come", field="delay")
    if delay > MAX_START_DELAY:
        raise InvalidInput(
            f"{what} is more than {MAX_START_DELAY.days} days ahead", "give a nearer time", field="delay"
        )
    return delay
