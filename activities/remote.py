"""The one place an Agent's request leaves the process: an HTTP call to a remote service.

It never sends after the attempt's complete-by, ends every exchange (sending, and reading the
whole answer) by complete-by plus ``ANSWER_GRACE_S``, heartbeats while it waits, and
classifies what went wrong: transient faults are retryable (Temporal's retry
policy takes them), permanent ones raise a non-retryable ApplicationError whose
type says why. The answer itself is read by ``sas.activities.remote_answers``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from sas.activities.heartbeats import beat
from sas.activities.outbound import SERVICE_RESPONSE_CAP, AnswerOverdue, ResponseTooLarge, post_capped
from sas.activities.remote_answers import DEADLINE, GARBAGE, RATE_LIMITED, TRANSIENT, read_answer
from sas.breaker.model import BREAKER_OPEN
from sas.breaker.rate_limit import SharedRateLimit
from sas.task_models.queues import SLOTS_FULL
from sas.task_models.text import MAX_ERROR_TEXT, bounded

if TYPE_CHECKING:
    from sas.breaker.service import ServiceBreaker
    from sas.settings import ResolvedService


# What the service's breaker counts against it: it did not answer, or not as a service does.
_SERVICE_FAULTS = (TRANSIENT, GARBAGE)
# Outcomes that say nothing of the service: no request went out, or what failed was ours.
_NOT_SENT = (DEADLINE, BREAKER_OPEN, SLOTS_FULL, RATE_LIMITED, "cancelled", "unexpected")

# Below this much time left there is no point in sending: the answer would come too late.
_MIN_TIME_LEFT_S = 0.05
# How long past the attempt's budget (its complete-by, or the service's timeout if sooner) an
# exchange may run before it is cut off and its connection closed. httpx's own timeouts, set to
# the budget, are per read: they end a service that falls silent, with their own error, and this
# grace lets them go first; the overall deadline then ends one that keeps trickling bytes, which
# no per-read timeout ever does.
ANSWER_GRACE_S = 0.5


class RemoteCaller:
    """Posts to one remote service with an Idempotency-Key, inside the attempt's deadline.

    One per service (a bulkhead): it holds that service's own client (connection pool), auth
    header and limit on calls in flight, so a hung service fills only its own slots. A call over
    the limit waits for a slot, heartbeating, until the attempt's complete-by; then it fails as
    transient, like a call that got no answer, and Temporal's retry policy takes it."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        *,
        max_concurrency: int = 100,
        timeout_s: float = 30.0,
        headers: Mapping[str, str] | None = None,
        breaker: ServiceBreaker | None = None,
        service: str | None = None,
        own_queue: str | None = None,
        rate_limit: SharedRateLimit | None = None,
    ) -> None:
        self._client = client
        # The service's calls per second over every worker (sas/breaker/rate_limit.py).
        self._rate_limit = rate_limit
        # The service's own task queue: a call served anywhere else shares its worker's slots.
        self._own_queue = own_queue
        self._max_concurrency = max_concurrency
        # The service's name for the metrics; else the path's first part (/<service>/<action>).
        self._service = service
        self._breaker = breaker
        self._base_url = base_url.rstrip("/")
        self._slots = asyncio.Semaphore(max_concurrency)
        self._timeout_s = timeout_s
        self._headers = dict(headers or {})

    @classmethod
    def for_service(
        cls,
        client: httpx.AsyncClient,
        service: ResolvedService,
        breaker: ServiceBreaker | None = None,
        own_queue: str | None = None,
    ) -> RemoteCaller:
        """The caller of one service from its settings (``settings.services.service(name)``),
        behind the service's circuit breaker if given (``sas/breaker/service.py``). ``own_queue``:
        the service's own task queue; a call served on another that finds every slot busy is
        refused (``SLOTS_FULL``) rather than kept waiting there."""
        token = service.auth_token
        return cls(
            client,
            service.url,
            max_concurrency=service.max_concurrency,
            timeout_s=service.timeout_s,
            headers={service.auth_header: token.get_secret_value()} if token is not None else None,
            breaker=breaker,
            service=service.name,
            own_queue=own_queue,
            rate_limit=SharedRateLimit.of(breaker, service.max_per_second),
        )

    async def post(
        self,
        path: str,
        body: dict[str, Any] | None,
        idempotency_key: str,
        complete_by: datetime,
        *,
        method: str = "POST",
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """A business call under our Idempotency-Key; the service's answer (a JSON object).
        ``method``: POST, or GET, PUT, PATCH or DELETE for a call declared so (``HttpCall``);
        ``body`` None sends none. ``query`` and ``headers``: the call's declared ones (the
        service's own auth header and the Idempotency-Key win over a declared header)."""
        sent = {**(headers or {}), **self._headers, "Idempotency-Key": idempotency_key}
        return await self._exchange(path, self._request(path, method, dict(query or {}), sent, body), complete_by)

    async def get(self, path: str, params: dict[str, str], complete_by: datetime) -> dict[str, Any]:
        """A read (an undo looking up the service's id of its forward effect); same rules as ``post``."""
        return await self._exchange(path, self._request(path, "GET", params, self._headers, None), complete_by)

    def _request(
        self, path: str, method: str, params: dict[str, str], headers: dict[str, str], body: dict[str, Any] | None
    ) -> Callable[[float], Awaitable[httpx.Response]]:
        """The request, to be sent with the time then left."""
        content: dict[str, Any] = {} if body is None else {"json": body}

        def request(time_left: float) -> Awaitable[httpx.Response]:
            # The answer is read with a cap: a runaway service cannot fill the worker's memory.
            return post_capped(
                self._client,
                f"{self._base_url}{path}",
                SERVICE_RESPONSE_CAP,
                method=method,
                params=params,
                headers=headers,
                timeout=httpx.Timeout(time_left, connect=min(time_left, 5.0)),
                within_s=time_left + ANSWER_GRACE_S,
                **content,
            )

        return request

    async def _in_slot(
        self, path: str, request: Callable[[float], Awaitable[httpx.Response]], complete_by: datetime
    ) -> httpx.Response:
        """Wait for one of the service's slots, then send with the time then left."""
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can lose a slot it acquired as it times out.
            async with asyncio.timeout(self._time_left(path, complete_by)):
                await self._slots.acquire()
        except TimeoutError:
            raise ApplicationError(
                f"{path}: every slot of its service stayed busy until complete-by", type=TRANSIENT
            ) from None
        try:
            return await self._send(path, request, complete_by)
        finally:
            self._slots.release()

    async def _send(
        self, path: str, request: Callable[[float], Awaitable[httpx.Response]], complete_by: datetime
    ) -> httpx.Response:
        if self._rate_limit is None:
            return await _answered(request(self._budget(path, complete_by)))
        # The permit is held from before the request leaves until its exchange has ended: where
        # in between it reached the service, it is counted in the permit's second.
        try:
            async with asyncio.timeout(self._time_left(path, complete_by)):
                permit = await self._rate_limit.take(self._budget(path, complete_by) + ANSWER_GRACE_S)
        except TimeoutError:
            raise ApplicationError(
                f"{path}: not sent, its service's rate limit had no room before complete-by", type=RATE_LIMITED
            ) from None
        try:
            return await _answered(request(self._budget(path, complete_by)))
        finally:
            await self._rate_limit.give_back(permit)

    def _on_a_shared_queue(self) -> bool:
        return self._own_queue is not None and activity.in_activity() and activity.info().task_queue != self._own_queue

    def _budget(self, path: str, complete_by: datetime) -> float:
        """What an exchange may take: the time left, at most the service's timeout."""
        return min(self._time_left(path, complete_by), self._timeout_s)

    @staticmethod
    def _time_left(path: str, complete_by: datetime) -> float:
        time_left = (complete_by - datetime.now(UTC)).total_seconds()
        if time_left < _MIN_TIME_LEFT_S:
            # The Scheduler already counts this attempt as failed; a request now could
            # race the next attempt. Stop without calling.
            raise ApplicationError(
                f"complete-by {complete_by.isoformat()} has passed; not calling {path}", type=DEADLINE
            )
        return time_left

    async def _exchange(
        self, path: str, request: Callable[[float], Awaitable[httpx.Response]], complete_by: datetime
    ) -> dict[str, Any]:
        time_left = self._time_left(path, complete_by)
        started = time.monotonic()
        outcome = "ok"
        error: str | None = None
        if self._breaker is not None and not self._breaker.admit():
            # No request while the breaker holds. Such a task was polled just before the breaker
            # opened (or sits on the workflow's queue, where nothing holds it). Non-retryable,
            # so that no attempt of Temporal's retry policy is spent on it: the Scheduler starts the
            # step's activity again, and it waits in the service's queue, which the gate keeps unpolled.
            _record_call(self._service, path, BREAKER_OPEN, 0.0)
            why = self._breaker.refused_why()
            raise ApplicationError(
                f"{path}: not sent, {why}",
                {"retry_in_s": self._breaker.retry_in_s(), "why": why},
                type=BREAKER_OPEN,
                non_retryable=True,
                # Not a failure of the call but a hand-over: no warning and traceback per call
                # held (thousands in an outage), and no failure in the SDK's metrics.
                category=ApplicationErrorCategory.BENIGN,
            )
        shared = self._on_a_shared_queue()
        if shared and self._slots.locked():
            # Every slot of the service busy, on a queue it shares with the other services: a
            # call waiting here would hold one of the workflow worker's slots, and a hung service
            # would soon hold them all. Refused at once, non-retryable, so no attempt is spent:
            # the Scheduler starts it again on the service's own queue, where it waits in
            # Temporal for the service's own worker (task_models/queues.py).
            _record_call(self._service, path, SLOTS_FULL, 0.0)
            raise ApplicationError(
                f"{path}: not sent yet, all {self._max_concurrency} slots of its service are busy;"
                " it waits in the service's own queue",
                type=SLOTS_FULL,
                non_retryable=True,
                category=ApplicationErrorCategory.BENIGN,  # a hand-over to its queue, as above
            )
        if shared:
            # The slot is taken here, with no await between the look above and the taking
            # (the semaphore's acquire does not wait when it is free): calls started together
            # cannot all find a slot free, then all queue for the slots in the shared worker.
            await self._slots.acquire()
        try:
            try:
                sending = (
                    self._send(path, request, complete_by) if shared else self._in_slot(path, request, complete_by)
                )
                response = await _heartbeating(sending, interval_s=_heartbeat_interval(time_left))
            except (httpx.TimeoutException, AnswerOverdue) as err:
                raise ApplicationError(
                    f"{path} did not answer before complete-by ({type(err).__name__})", type=TRANSIENT
                ) from err
            except httpx.TransportError as err:
                raise ApplicationError(
                    bounded(f"{path} unreachable: {type(err).__name__}: {err}", MAX_ERROR_TEXT), type=TRANSIENT
                ) from err
            except ResponseTooLarge as err:
                raise ApplicationError(f"{path} {err}", type=GARBAGE) from err
            except httpx.DecodingError as err:
                # A body its own Content-Encoding does not decode: an answer, but not one.
                raise ApplicationError(
                    bounded(f"{path} answered a body that does not decode: {err}", MAX_ERROR_TEXT), type=GARBAGE
                ) from err
            return read_answer(path, response)
        except ApplicationError as err:
            outcome, error = err.type or "error", err.message
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except BaseException:
            # A fault of ours, not a reading of the service: filed apart, and the breaker not told.
            outcome = "unexpected"
            raise
        finally:
            if shared:
                self._slots.release()  # _heartbeating returns only once the request has ended
            _record_call(self._service, path, outcome, time.monotonic() - started)
            if self._breaker is not None and outcome not in _NOT_SENT:
                self._breaker.record(outcome not in _SERVICE_FAULTS, error)


def _record_call(service: str | None, path: str, outcome: str, seconds: float) -> None:
    """Per remote service and action: call latency, and errors by type (Prometheus). The action
    is the path's last part (``/flights/book`` -> ``book``; a declared path may be any shape)."""
    if not activity.in_activity():
        return
    first, _, rest = path.strip("/").partition("/")
    service = service or first
    action = rest.rpartition("/")[2] if rest else first
    meter = activity.metric_meter()
    attrs = {"service": service, "action": action, "outcome": outcome}
    meter.create_histogram_timedelta(
        "sas_agent_call_latency", "Remote call latency of the Agents", "ms"
    ).with_additional_attributes(attrs).record(timedelta(seconds=seconds))
    if outcome != "ok":
        meter.create_counter("sas_agent_call_errors", "Failed remote calls of the Agents").add(
            1, {"service": service, "action": action, "error_type": outcome}
        )


def _heartbeat_interval(time_left: float) -> float:
    """Beat three times per heartbeat timeout, so one late beat never looks like a dead agent."""
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    base = timeout.total_seconds() / 3 if timeout else time_left / 3
    return max(min(base, 5.0), 0.1)


async def _answered(sent: Awaitable[httpx.Response]) -> httpx.Response:
    """Await a request that has left, through a cancellation of the attempt, and only then
    stop as cancelled. Dropping the connection would not take the request back from the
    service, which may still act on it; the Scheduler waits for a cancelled attempt to end, so
    the undo that follows is decided on what the service did. Bounded: the exchange itself ends
    by the attempt's complete-by plus ANSWER_GRACE_S, answered or not (``post_capped``'s
    ``within_s``)."""
    call = asyncio.ensure_future(sent)
    cancelled = False
    while True:
        try:
            response = await asyncio.shield(call)
            break
        except asyncio.CancelledError:
            if call.cancelled():
                raise
            cancelled = True
        except BaseException:
            if not cancelled:
                raise
            break  # cancelled all the same: what the request met no longer matters
    if cancelled:
        raise asyncio.CancelledError
    return response


async def _heartbeating(request: Any, interval_s: float) -> httpx.Response:
    """Await the request, heartbeating so a dead agent is noticed before complete-by and
    a cancellation from the Scheduler reaches us. Once cancelled, a request already sent
    still gets its answer (``_answered``), heartbeating meanwhile: only then does the attempt end."""
    call = asyncio.ensure_future(request)
    try:
        while True:
            done, _ = await asyncio.wait({call}, timeout=interval_s)
            if done:
                return call.result()
            if activity.in_activity():
                beat()
    except asyncio.CancelledError:
        call.cancel()  # one waiting for a slot stops here; one sent finishes first
        while not call.done():
            await asyncio.wait({call}, timeout=interval_s)
            if activity.in_activity():
                beat()
        raise
    finally:
        call.cancel()
