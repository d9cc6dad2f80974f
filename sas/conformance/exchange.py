"""The kit's requests, and the service's answers as sas's Agents read them.

Every request is bounded as an Agent's is: its answer read up to 1 MiB, and the whole exchange,
from sending to the answer's last byte, within the check's timeout (an overall deadline, not one
per read: a service that trickles its answer is cut off). Each answer is read by the same
function that reads an Agent's (``activities/remote_answers.py``), so the kit calls a success, a
refusal, a transient fault or garbage exactly what a running task would; the raw status,
content type and JSON are kept besides, for the clauses that look at the answer's shape.

Where an Agent would ask again, so does the kit: a transient answer (a 5xx, 408, 425, 429, a
connection refused or reset: an answer lost on its way) is sent again, the same request under the
same key, with the Agent's quick retries (``StepPolicyValues``: 3 attempts, 0.5 s then 1 s apart,
by default), each attempt bounded as the first. So a service with faults on is judged on what it
promises, not on one unlucky answer. Not asked again: an answer cut off at the timeout (each
request's time stays one timeout, however the service stalls), garbage (the kit is there to
say a service answers it; the ``answers`` clause does), a refusal, and a lookup's ``in_flight``
(the in-flight clause judges that answer itself).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from sas.activities.outbound import SERVICE_RESPONSE_CAP, AnswerOverdue, ResponseTooLarge, post_capped

# The reading an Agent applies, not a copy of it: the kit must judge an answer as a task would.
from sas.activities.remote_answers import GARBAGE, IN_FLIGHT, REJECTED, TRANSIENT, VOIDED, read_answer
from sas.task_models.plans import StepPolicyValues
from sas.task_models.results import MAX_RESULT_BYTES, secret_fields
from sas.task_models.strict_json import StrictJsonError, loads_strict
from sas.task_models.text import bounded
from sas.task_types.services import HttpRequest

SUCCESS = "success"
_SHOWN = 300  # characters of what a service said that a result's detail quotes


@dataclass(frozen=True)
class Answer:
    """One answer.

    Attributes:
        request: ``POST /flights/book`` (the method and path asked).
        status: The HTTP status; None when no answer came.
        content_type: The answer's Content-Type.
        data: The answer's JSON; None when it was not JSON.
        reading: sas's reading: ``success``, ``RemoteTransient``, ``RemoteGarbage``,
            ``RemoteRejected``, ``StepVoided``, or ``in_flight`` (a 4xx ``{"error": "in_flight"}``).
        said: sas's message for anything but a success.
        hidden: The answer's fields its result model marks ``Secret``: never shown.
        overdue: No whole answer came within the timeout (not asked again).
        retried: What the earlier attempts of this request answered, each transient and shown
            in one line; empty when the first attempt's answer is this one.
    """

    request: str
    status: int | None
    content_type: str
    data: Any
    reading: str
    said: str = ""
    hidden: frozenset[str] = frozenset()
    overdue: bool = False
    retried: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.reading == SUCCESS

    @property
    def transient(self) -> bool:
        """Read by sas as transient: the Agent would ask again (a lookup's in_flight aside)."""
        return self.reading == TRANSIENT

    @property
    def error_code(self) -> str | None:
        """The ``error`` of a JSON error answer."""
        code = self.data.get("error") if isinstance(self.data, dict) else None
        return code if isinstance(code, str) else None

    def shown(self) -> str:
        """What came back, short enough to quote in one line."""
        if self.status is None:
            return bounded(self.said, _SHOWN)
        data = self.data
        if isinstance(data, dict) and self.hidden:
            data = {k: "***" if k in self.hidden else v for k, v in data.items()}
        body = json.dumps(data, separators=(",", ":")) if data is not None else self.content_type
        return bounded(f"{self.status} {body}", _SHOWN)


class Exchange:
    """Sends the kit's requests to one service.

    Args:
        client: The HTTP client (no redirects followed, as the Agents' own).
        base_url: The service's base URL.
        headers: Sent with every request (the service's auth header).
        timeout_s: The longest one exchange may take, whole: sending, and reading the answer.
        retry: The quick retries of a transient answer, as the Agent's (attempts, waits);
            default: a step's default policy. ``max_attempts=1`` asks once.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 10.0,
        retry: StepPolicyValues | None = None,
    ) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._headers = dict(headers or {})
        self._timeout_s = timeout_s
        self._retry = retry or StepPolicyValues()

    async def send(self, request: HttpRequest, key: str, model: type[BaseModel] | None = None) -> Answer:
        """A business call under ``key``, as sas's Agent sends it (``activities/remote.py``: the
        declared headers under the service's own and the Idempotency-Key); ``model``'s secret
        fields are never shown."""
        headers = {**request.headers, **self._headers, "Idempotency-Key": key}
        content: dict[str, Any] = {} if request.body is None else {"json": request.body}
        answer = await self._ask(
            f"{request.method} {request.path}",
            request.path,
            method=request.method,
            params=dict(request.query),
            headers=headers,
            **content,
        )
        return replace(answer, hidden=secret_fields(model)) if model is not None else answer

    async def look_up(self, path: str, key: str) -> Answer:
        """``GET <path>?idempotency_key=<key>``."""
        return await self._ask(
            f"GET {path}", path, method="GET", params={"idempotency_key": key}, headers=self._headers
        )

    async def _ask(self, request: str, path: str, **kwargs: Any) -> Answer:
        """The request, asked again while its answer is transient, as the Agent's quick retries
        do: the same method, path, body and key each time, each attempt within the timeout."""
        policy = self._retry
        wait_s = policy.initial_interval_s
        earlier: list[str] = []
        while True:
            answer = await self._ask_once(request, path, **kwargs)
            if not answer.transient or answer.overdue or len(earlier) + 1 >= policy.max_attempts:
                return replace(answer, retried=tuple(earlier)) if earlier else answer
            earlier.append(answer.shown())
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * policy.backoff, policy.max_interval_s)

    async def _ask_once(self, request: str, path: str, **kwargs: Any) -> Answer:
        try:
            response = await post_capped(
                self._client, f"{self._base}{path}", SERVICE_RESPONSE_CAP, within_s=self._timeout_s, **kwargs
            )
        except ResponseTooLarge as err:
            return Answer(request, None, "", None, GARBAGE, f"{request} {err}")
        except httpx.DecodingError as err:
            return Answer(request, None, "", None, GARBAGE, f"{request} answered a body that does not decode: {err}")
        except AnswerOverdue as err:
            return Answer(request, None, "", None, TRANSIENT, f"{request} {err}", overdue=True)
        except httpx.TimeoutException as err:
            said = f"{request}: no answer within {self._timeout_s:g} s ({type(err).__name__})"
            return Answer(request, None, "", None, TRANSIENT, said, overdue=True)
        except httpx.TransportError as err:
            return Answer(request, None, "", None, TRANSIENT, f"{request}: no answer ({type(err).__name__}: {err})")
        content_type = response.headers.get("content-type", "")
        try:
            # As the Agent reads it: nested too deep is no JSON, not Python's recursion limit.
            data: Any = loads_strict(response.content)
        except StrictJsonError:
            data = None
        try:
            read_answer(path, response)
        except ApplicationError as err:
            reading = err.type or TRANSIENT
            if isinstance(data, dict) and data.get("error") == IN_FLIGHT and response.status_code >= 400:
                reading = IN_FLIGHT
            return Answer(request, response.status_code, content_type, data, reading, err.message)
        return Answer(request, response.status_code, content_type, data, SUCCESS)


def model_problem(answer: Answer, model: type[BaseModel] | None) -> str | None:
    """Why a success would be garbage to the step that declared ``model``: not a valid result, or
    over the 64 KiB a step's result may be as JSON (as ``activities/agent.py`` judges it)."""
    if not answer.ok or answer.status is None:
        return None  # a refusal, or an undo sas would not send: nothing to read
    size = len(json.dumps(answer.data, ensure_ascii=True, separators=(",", ":")))
    if size > MAX_RESULT_BYTES:
        return f"{answer.request} answered a result of {size:,} bytes as JSON, over {MAX_RESULT_BYTES:,}"
    if model is None:
        return None
    try:
        model.model_validate(answer.data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        return bounded(f"{answer.request} answered no valid {model.__name__}: {where}: {first['msg']}", _SHOWN)
    return None


def is_refusal(answer: Answer) -> bool:
    """A refusal for good, as sas reads one (a voided key's included)."""
    return answer.reading in (REJECTED, VOIDED)


def is_voided(answer: Answer) -> bool:
    """``409 {"error": "voided"}``, as the contract has it."""
    return answer.reading == VOIDED and answer.status == 409
