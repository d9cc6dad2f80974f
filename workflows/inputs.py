"""Decoding a workflow's input or a signal's payload inside the workflow, so that no payload
can wedge it.

Workflows take their input as ``RawValue`` and decode it here rather than letting the SDK
do it before the workflow runs: a payload the SDK cannot decode (nested too deeply, not JSON,
the wrong shape for a typed parameter) would fail every workflow task, and the workflow would
stay Running for ever with nothing to say why. Decoded here, it fails the workflow at once,
non-retryably, with ``InvalidInput`` and one short line per wrong field.

It also holds the one rule of what JSON sas takes in, :func:`json_problems`: standard JSON only,
so no ``NaN`` or infinity (Python's ``json`` and pydantic read and write them, other SDKs and the
UI cannot, and a model dumps an infinity inside a dict as ``null``). The task client checks a
task's input by it before anything is sent, and the workflow checks every payload it decodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

INVALID_INPUT = "InvalidInput"
M = TypeVar("M", bound=BaseModel)

#: What a non-finite number is told, as sas/task_models/strict_json.py words it for a file.
NOT_FINITE = "is not a JSON number; give a finite number"

# A payload with a non-finite number is refused from this patch on; a workflow that took one in
# before it (and went on with it) replays as it ran. The patch is asked only when such a number
# is met, so no other workflow gets its marker.
STRICT_JSON_PAYLOADS = "payloads-strict-json"

Problem = tuple[tuple[int | str, ...], str]


def given_fields(value: BaseModel) -> frozenset[str]:
    """The fields of a task's input that travel: those its submitter set, and those a default
    factory made (made once, where the input was read, and never again). Each other field takes
    the task type's plain default wherever the input is read: the same input, sent shorter."""
    made = {name for name, field in type(value).model_fields.items() if field.default_factory is not None}
    return frozenset(value.model_fields_set | made)


def json_problems(value: Any, *, loose: bool = False, limit: int = 10) -> list[Problem]:
    """Where ``value`` is not standard JSON: (the field's path, why), at most ``limit`` of them.

    Refused: a non-finite float or Decimal (NaN, Infinity, -Infinity), an object key that is not
    text, and any other value than an object, array, text, number, true, false or null.
    ``loose``: a task input as a caller gives it, before its model reads it, where any value the
    model may take is let through (a datetime, a nested model, which is looked into), and only
    non-finite numbers are refused. Walked without recursion, so no nesting breaks it; pure and
    deterministic, so the workflow calls it too."""
    problems: list[Problem] = []
    stack: list[tuple[tuple[int | str, ...], Any]] = [((), value)]
    while stack and len(problems) < limit:
        loc, item = stack.pop()
        if item is None or isinstance(item, bool | str | int):
            continue
        if isinstance(item, float | Decimal):
            if isinstance(item, Decimal) and not loose:
                problems.append((loc, "a Decimal is not a JSON value; give a number"))
            elif not (item.is_finite() if isinstance(item, Decimal) else math.isfinite(item)):
                problems.append((loc, f"{_non_finite(item)} {NOT_FINITE}"))
            continue
        if loose and isinstance(item, BaseModel):
            stack.append((loc, item.model_dump()))
            continue
        if isinstance(item, Mapping):
            children: list[tuple[tuple[int | str, ...], Any]] = []
            for key, child in item.items():
                if not isinstance(key, str) and not loose:
                    problems.append(((*loc, str(key)), f"an object key must be text, not {type(key).__name__}"))
                    continue
                children.append(((*loc, str(key)), child))
            stack.extend(reversed(children))  # popped in order: the first field is named first
            continue
        if isinstance(item, list | tuple):
            stack.extend(((*loc, i), child) for i, child in reversed(list(enumerate(item))))
            continue
        if not loose:
            problems.append((loc, f"a {type(item).__name__} is not a JSON value"))
    return problems


def _non_finite(number: float | Decimal) -> str:
    if number.is_nan() if isinstance(number, Decimal) else math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def json_problem_text(problems: list[Problem]) -> str:
    """The problems in one line, each field named as :func:`short` names it."""
    return "; ".join(f"{_loc(loc)}: {why}" for loc, why in problems)


def decode(raw: RawValue) -> Any:
    """A raw payload as JSON values (None for no payload); ValueError with a short reason if it
    is not decodable, or not standard JSON (a NaN or an infinity, :func:`json_problems`)."""
    value = _decode(raw)
    problems = json_problems(value)
    if problems and workflow.patched(STRICT_JSON_PAYLOADS):
        raise ValueError(json_problem_text(problems))
    return value


def _decode(raw: RawValue) -> Any:
    if not raw.payload.data and not raw.payload.metadata:
        return None
    try:
        return workflow.payload_converter().from_payload(raw.payload)
    except RecursionError:
        raise ValueError("the payload is nested too deeply") from None
    except ValidationError as err:  # pydantic's own JSON parser: e.g. its recursion limit
        first = err.errors(include_url=False)[0]["msg"] if err.errors() else "invalid JSON"
        raise ValueError(f"the payload cannot be decoded: {first}") from None
    except Exception as err:  # noqa: BLE001 - any decoding failure is the payload's fault
        raise ValueError(f"the payload cannot be decoded: {type(err).__name__}") from None


def decode_model(raw: RawValue | Any, model: type[M], what: str) -> M:
    """The workflow's input as ``model``, or a non-retryable InvalidInput failure saying what is wrong."""
    try:
        value = decode(raw) if isinstance(raw, RawValue) else raw
        return model.model_validate(value)
    except ValidationError as err:
        raise invalid(what, short(err)) from None
    except ValueError as err:
        raise invalid(what, str(err)) from None


def invalid(what: str, problem: str) -> ApplicationError:
    return ApplicationError(f"invalid {what} input: {problem}", type=INVALID_INPUT, non_retryable=True)


def short(err: ValidationError) -> str:
    """One short line per wrong field: ``items[0].quantity: must be greater than 0``."""
    return "; ".join(f"{_loc(e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)[:10])


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "input"
