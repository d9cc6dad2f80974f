"""The ASGI app: inventory, payment and shipping, the ledger, and (optionally) fault injection.

A business call goes: Idempotency-Key check -> content type -> body validation ->
fault rule -> per-key lock -> one ledger transaction. Faults are chosen after
validation because ``match_order_id`` needs the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sas_demo_services.errors import ServiceError, error_response
from sas_demo_services.faults import FaultBook, FaultRule, FaultSpec
from sas_demo_services.ledger import Ledger
from sas_demo_services.locks import KeyLocks
from sas_demo_services.operations import Outcome, look_up, perform
from sas_demo_services.schemas import ENDPOINTS, Endpoint

logger = logging.getLogger("sas_demo_services")

M = TypeVar("M", bound=BaseModel)

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 200
# Every request body the services read is capped; the largest real one is well under 1 KiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024

_GARBAGE = (
    "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1><p>upstream said hi</p></body></html>"
)


@dataclass
class ServiceState:
    """What the routes share.

    Attributes:
        ledger: The durable store.
        faults: The fault rules; None when fault injection is disabled.
        locks: Per-key locks.
    """

    ledger: Ledger
    faults: FaultBook | None
    locks: KeyLocks


def create_app(
    ledger_path: str,
    enable_faults: bool,
    fault_seed: int | None = None,
    admin_token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """Build the app over the ledger at ``ledger_path`` (opened now, so a bad path fails early).

    Args:
        ledger_path: SQLite file of the ledger; created if missing.
        enable_faults: Serve the ``/admin`` routes; without it they answer 404.
        fault_seed: Seed for fault probabilities, for repeatable chaos runs.
        admin_token: The bearer token every ``/admin`` call must carry; required with
            ``enable_faults`` (an open reset endpoint is one SSRF away from a wiped ledger).
        max_body_bytes: Longest request body read; a longer one is answered 413.

    Returns:
        The Starlette app; its state is at ``app.state.services``.

    Raises:
        ValueError: If ``enable_faults`` is set without an ``admin_token``.
        sqlite3.Error: If the ledger cannot be opened.
    """
    if enable_faults and not admin_token:
        raise ValueError("the /admin API needs a token: set SAS_SERVICES__ADMIN_TOKEN")
    state = ServiceState(
        ledger=Ledger(ledger_path),
        faults=FaultBook(random.Random(fault_seed)) if enable_faults else None,
        locks=KeyLocks(),
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.ledger.close()

    routes: list[BaseRoute] = [
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/ledger", _ledger_route(state), methods=["GET"]),
        *(_business_route(endpoint, state) for endpoint in ENDPOINTS),
        *(_lookup_route(endpoint, state) for endpoint in ENDPOINTS if endpoint.undoes is None),
    ]
    if state.faults is not None:
        assert admin_token is not None  # checked above
        routes += _admin_routes(state, state.faults, admin_token)
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(BodyLimit, max_bytes=max_body_bytes)],
        exception_handlers={
            HTTPException: _http_error,
            ServiceError: _service_error,
            Exception: _internal_error,
        },
    )
    app.state.services = state
    return app


async def _healthz(_: Request) -> Response:
    return JSONResponse({"ok": True})


def _ledger_route(state: ServiceState) -> Callable[[Request], Awaitable[Response]]:
    async def ledger(request: Request) -> Response:
        entries = await state.ledger.entries(
            order_id=request.query_params.get("order_id"),
            idempotency_key=request.query_params.get("idempotency_key"),
        )
        return JSONResponse({"entries": [entry.model_dump(mode="json") for entry in entries]})

    return ledger


# --- business endpoints -----------------------------------------------------------


def _lookup_route(endpoint: Endpoint, state: ServiceState) -> Route:
    """``GET /<service>/lookup?idempotency_key=K``: the service's id of what it did under our key.

    As a real provider's search by metadata: an undo whose forward answer never arrived (the
    attempt timed out, the workflow died) finds the id it must name this way. "Nothing" is
    final: the key is voided with the answer, so a late forward under it has no effect."""

    async def lookup(request: Request) -> Response:
        key = request.query_params.get("idempotency_key", "")
        if not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
            raise ServiceError(
                400, "invalid_request", f"idempotency_key is required: 1 to {MAX_KEY_LENGTH} printable characters"
            )
        # Under the key's lock: a forward request being served under it is waited for, and
        # answered about once it is done (voided in the same transaction if nothing was).
        async with state.locks.hold(key):
            found = await state.ledger.run(look_up(endpoint, key))
        return JSONResponse({endpoint.id_field: found.provider_id if found is not None else None})

    lookup.__name__ = f"{endpoint.service}_lookup"
    return Route(f"/{endpoint.service}/lookup", lookup, methods=["GET"])


def _business_route(endpoint: Endpoint, state: ServiceState) -> Route:
    async def handle(request: Request) -> Response:
        key = _idempotency_key(request)
        body = await _parse_json(request, endpoint.model)
        parcel = getattr(body, "parcel", None)
        target = endpoint.target_key(body)
        # The key is held for the whole request, an injected delay or hang included: the request
        # is being served from here on, so a lookup of the key waits for it (the contract's
        # in-flight rule) instead of answering "nothing" and voiding a key about to take effect.
        # The fault is picked under the lock too, so a rule's hits show the key is held.
        async with state.locks.hold(key, *([target] if target else [])):
            rule = None
            if state.faults is not None:
                answered = await state.ledger.run(lambda tx: tx.stored_response(key) is not None)
                rule = state.faults.pick(endpoint.name, body.order_id, parcel, answered=answered)
            fault = rule.spec if rule is not None else None
            if rule is not None:
                refusal = await _before_effect(rule, request, endpoint)
                if refusal is not None:
                    return refusal
            try:
                response = _outcome_response(await state.ledger.run(perform(endpoint, key, body)))
            except ServiceError as err:
                response = err.response()
        if fault is not None and fault.kind == "lost_response":
            # The effect (if any) is committed; only the answer goes missing.
            logger.info("fault lost_response on %s key=%s", endpoint.name, key)
            return error_response(500, "internal_error", fault.said or "the response was lost (injected fault)")
        return response

    handle.__name__ = f"{endpoint.service}_{endpoint.action}"
    return Route(endpoint.path, handle, methods=["POST"])


def _idempotency_key(request: Request) -> str:
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is None or not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
        raise ServiceError(
            400,
            "missing_idempotency_key",
            f"header {IDEMPOTENCY_HEADER} is required: 1 to {MAX_KEY_LENGTH} printable characters",
        )
    return key


async def _parse_json(request: Request, model: type[M]) -> M:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise ServiceError(415, "unsupported_media_type", f"expected application/json, got {media_type or 'nothing'!r}")
    raw = await request.body()
    try:
        return model.model_validate_json(raw)
    except ValidationError as err:
        raise ServiceError(422, "invalid_request", _describe(err)) from err


def _describe(err: ValidationError) -> str:
    problems = []
    for problem in err.errors(include_url=False)[:5]:
        where = ".".join(str(part) for part in problem["loc"]) or "body"
        problems.append(f"{where}: {problem['msg']}")
    return "; ".join(problems)


def _outcome_response(outcome: Outcome) -> Response:
    headers = {REPLAYED_HEADER: "true"} if outcome.replayed else None
    return Response(outcome.body, status_code=outcome.status, media_type="application/json", headers=headers)


async def _before_effect(rule: FaultRule, request: Request, endpoint: Endpoint) -> Response | None:
    """Apply the part of a fault that comes before the effect; a response means: stop here."""
    fault = rule.spec
    logger.info("fault %s on %s", fault.kind, endpoint.name)
    if fault.latency_ms is not None:
        # Any kind may be slow first: the request holds its key meanwhile, so a lookup of the
        # key meets it in flight, whatever it then does.
        with contextlib.suppress(TimeoutError):  # the delay served out, or the rule removed first
            await asyncio.wait_for(rule.lifted.wait(), timeout=fault.latency_ms / 1000)
    if fault.kind == "latency":
        return None
    if fault.kind == "transient":
        return error_response(
            fault.status or 503,
            fault.error or "unavailable",
            fault.said or "temporarily unavailable (injected fault)",
        )
    if fault.kind == "permanent":
        return error_response(
            fault.status or 422, fault.error or "rejected", fault.said or "request rejected (injected fault)"
        )
    if fault.kind == "down":
        return error_response(503, "service_down", fault.said or f"{endpoint.service} is down (injected fault)")
    if fault.kind == "garbage":
        return HTMLResponse(_GARBAGE, status_code=200)
    if fault.kind == "hang":
        await _stall(request, fault.hang_s, rule.lifted)
        return error_response(504, "timeout", fault.said or "gave up after hanging (injected fault)")
    return None  # lost_response acts after the effect


async def _stall(request: Request, seconds: float, lifted: asyncio.Event) -> None:
    """Wait ``seconds``, or less if the client hangs up first (then nobody is listening) or the
    fault is removed."""

    async def client_gone() -> None:
        # The body is consumed, so the next ASGI message is the disconnect.
        while (await request.receive())["type"] != "http.disconnect":
            pass

    gone, removed = asyncio.ensure_future(client_gone()), asyncio.ensure_future(lifted.wait())
    try:
        done, _ = await asyncio.wait({gone, removed}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        removed.cancel()
    if gone in done:
        logger.info("hang ended: the client hung up")
    elif removed in done:
        logger.info("hang ended: the fault was removed")
    else:
        logger.info("hang ended after %.1fs", seconds)


# --- admin ------------------------------------------------------------------------


def _admin_routes(state: ServiceState, faults: FaultBook, admin_token: str) -> list[BaseRoute]:
    expected = f"Bearer {admin_token}".encode()

    def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def check_token(request: Request) -> Response:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return error_response(
                    401,
                    "unauthorized",
                    "the /admin API needs Authorization: Bearer <SAS_SERVICES__ADMIN_TOKEN>",
                    {"WWW-Authenticate": "Bearer"},
                )
            return await handler(request)

        return check_token

    async def add_fault(request: Request) -> Response:
        try:
            spec = FaultSpec.model_validate_json(await request.body())
        except ValidationError as err:
            raise ServiceError(422, "invalid_request", _describe(err)) from err
        rule = faults.add(spec)
        logger.info("fault added id=%s %s", rule.id, spec.model_dump(exclude_none=True))
        return JSONResponse({"id": rule.id}, status_code=201)

    async def list_faults(_: Request) -> Response:
        return JSONResponse({"faults": [rule.to_json() for rule in faults.rules()]})

    async def clear_faults(_: Request) -> Response:
        return JSONResponse({"cleared": faults.clear()})

    async def delete_fault(request: Request) -> Response:
        rule_id = request.path_params["fault_id"]
        if not faults.remove(rule_id):
            raise ServiceError(404, "fault_not_found", f"no fault rule with id {rule_id!r}")
        return JSONResponse({"deleted": rule_id})

    async def in_flight(_: Request) -> Response:
        return JSONResponse({"in_flight": state.locks.in_flight()})

    async def reset(_: Request) -> Response:
        faults.clear()
        await state.ledger.reset()
        logger.info("reset: faults, ledger, idempotency store and tombstones cleared")
        return JSONResponse({"reset": True})

    return [
        Route("/admin/faults", guarded(add_fault), methods=["POST"]),
        Route("/admin/faults", guarded(list_faults), methods=["GET"]),
        Route("/admin/faults", guarded(clear_faults), methods=["DELETE"]),
        Route("/admin/faults/{fault_id}", guarded(delete_fault), methods=["DELETE"]),
        Route("/admin/in_flight", guarded(in_flight), methods=["GET"]),
        Route("/admin/reset", guarded(reset), methods=["POST"]),
    ]


# --- body limit -------------------------------------------------------------------


class BodyLimit:
    """Answer 413 to a request body longer than ``max_bytes``, declared or streamed (chunked).

    The check runs as the route reads the body, so the refusal goes through the app's own
    HTTPException handler and has the usual JSON error shape."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise HTTPException(413, f"the request body is over {self.max_bytes} bytes")
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, f"the request body is over {self.max_bytes} bytes")
            return message

        await self.app(scope, limited_receive, send)


# --- errors -----------------------------------------------------------------------

_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), exc.detail, exc.headers)


async def _service_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    return exc.response()


async def _internal_error(_: Request, exc: Exception) -> Response:
    logger.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")
