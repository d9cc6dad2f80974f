"""Decoding a workflow's input or a signal's payload inside the workflow, so that no payload
can wedge it.

Workflows take their input as ``RawValue`` and decode it here rather than letting the SDK
do it before the workflow runs: a payload the SDK cannot decode (nested too deeply, not JSON,
the wrong shape for a typed parameter) would fail every workflow task, and the workflow would
stay Running for ever with nothing to say why. Decoded here, it fails the workflow at once,
non-retryably, with ``InvalidInput`` and one short line per wrong field.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

INVALID_INPUT = "InvalidInput"
M = TypeVar("M", bound=BaseModel)


def decode(raw: RawValue) -> Any:
    """A raw payload as JSON values (None for no payload); ValueError with a short reason if it is not decodable."""
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
