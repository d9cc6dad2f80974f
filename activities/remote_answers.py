"""How an Agent reads a remote service's answer: a JSON object is the answer; anything else is
the ApplicationError it means, whose type (as seen in Temporal's history and the state store's
``error_type`` column) says whether a retry may help (docs/http-contract.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
from temporalio.exceptions import ApplicationError

from sas.task_models.strict_json import StrictJsonError, loads_strict
from sas.task_models.text import MAX_ERROR_TEXT, MAX_FULL_ERROR_TEXT, bounded

# Error types, as seen in Temporal's history and the state store's error_type column.
TRANSIENT = "RemoteTransient"
REJECTED = "RemoteRejected"
VOIDED = "StepVoided"
GARBAGE = "RemoteGarbage"
DEADLINE = "CompleteByPassed"
# Not sent: the service's rate limit had no room for it before complete-by (retryable).
RATE_LIMITED = "RateLimited"
# The error code of a lookup answered while a request under its key is still being served.
IN_FLIGHT = "in_flight"


def nothing_done(err: ApplicationError) -> bool:
    """Whether a lookup's refusal is its "nothing was done under that key": a 404 with a JSON
    object, which voids the key at the service as the 200 with nulls does (docs/http-contract.md)."""
    details = err.details[0] if err.details and isinstance(err.details[0], Mapping) else {}
    return err.type == REJECTED and details.get("status") == 404


def read_answer(path: str, response: httpx.Response) -> dict[str, Any]:
    """The service's answer to ``path``, a JSON object; otherwise the ApplicationError it means:
    transient for a 5xx, 408, 425, 429 or a lookup still in flight, garbage for what is no JSON
    object, and a non-retryable rejection (voided, or rejected) for any other 4xx."""
    status = response.status_code
    unread = ""
    try:
        # Standard JSON, nested at most MAX_JSON_DEPTH deep: any deeper would meet Python's
        # recursion limit, which is no reading of the answer at all.
        content: Any = loads_strict(response.content) if "json" in response.headers.get("content-type", "") else None
    except StrictJsonError as err:  # broken JSON, nested too deep, or bytes that are not even UTF-8
        content, unread = None, f" ({err})"
    if status >= 500 or status in (408, 425, 429):
        message = content.get("message") if isinstance(content, dict) else None
        text, full = _said(f"{path} answered {status}: ", message or response.reason_phrase)
        raise ApplicationError(text, *full, type=TRANSIENT)
    if not isinstance(content, dict):
        # A service that answers with HTML or broken JSON is misbehaving, not saying no;
        # retrying may well succeed.
        said = response.headers.get("content-type", "no content type")
        raise ApplicationError(
            bounded(f"{path} answered {status} with {said!r}, not a JSON object{unread}", MAX_ERROR_TEXT),
            type=GARBAGE,
        )
    if status >= 400 and content.get("error") == IN_FLIGHT:
        # A lookup of a key whose request the service is still serving: ask again, never decide on it.
        raise ApplicationError(f"{path} answered {status}: a request under the key is still in flight", type=TRANSIENT)
    if status >= 400:
        code = bounded(str(content.get("error", "rejected")), _MAX_CODE)
        text, full = _said(f"{path} rejected the request ({status} {code}): ", content.get("message") or code)
        raise ApplicationError(
            text,
            {"status": status, "error": code, **(full[0] if full else {})},
            type=VOIDED if code == "voided" else REJECTED,
            non_retryable=True,
        )
    return content


# A service's error code is a word or two (docs/http-contract.md); more is cut.
_MAX_CODE = 100
# Where the full text of a cut message is: what the activity's failure carries in history.
_FULL_TEXT_NOTE = "; the full text is the activity failure's details.full_message in the workflow's history"


def _said(prefix: str, message: object) -> tuple[str, list[dict[str, str]]]:
    """The error message for what a service said, cut to MAX_ERROR_TEXT bytes (it is kept in the
    task's status, the state store and alerts), and, if it was cut, the details that keep the
    full text (itself cut at MAX_FULL_ERROR_TEXT) in the activity's failure in Temporal's history."""
    said = str(message)
    whole = prefix + said
    text = bounded(whole, MAX_ERROR_TEXT, cut_note=_FULL_TEXT_NOTE)
    return text, ([] if text == whole else [{"full_message": bounded(said, MAX_FULL_ERROR_TEXT)}])
