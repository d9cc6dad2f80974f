"""The codec server: Temporal's "remote codec" HTTP protocol, so the Temporal UI and CLI
can show decrypted payloads to whoever runs it (and only to them).

POST /encode and /decode (also /{namespace}/encode|decode, for the CLI's
``--codec-endpoint`` templating) take and return ``{"payloads": [...]}`` in protobuf
JSON (bytes as base64). Anyone who can reach it can decrypt what they send it, so:

- it answers only requests whose Host header is one of ``allowed_hosts`` (400 otherwise):
  a DNS-rebinding page reaches it under its own host name;
- with a ``token`` set, /encode and /decode need ``Authorization: Bearer <token>`` (401);
- browsers may call it cross-origin only from the configured Temporal UI origins;
- it takes only ``Content-Type: application/json`` (415): a page on another origin can POST
  ``text/plain`` without a CORS preflight, but not JSON;
- bodies over :data:`MAX_BODY_BYTES` get 413.

``GET /healthz`` answers ``ok`` without touching a key, for container healthchecks.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable, Sequence

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from sas.payload_codec.codec import PayloadDecryptionError
from sas.payload_codec.compression import PayloadDecompressionError
from sas.settings import CodecServerSettings
from sas.task_models.strict_json import StrictJsonError, loads_strict

log = logging.getLogger("sas.codec_server")

# A history page the UI decodes is far smaller; this only stops a runaway request.
MAX_BODY_BYTES = 16 * 1024 * 1024

Transform = Callable[[Sequence[Payload]], Awaitable[list[Payload]]]


def build_codec_app(
    codec: PayloadCodec, ui_origins: Sequence[str], access: CodecServerSettings | None = None
) -> Starlette:
    """The ASGI app; ``ui_origins`` are the Temporal UI origins allowed to call it from a browser.

    ``access`` (token, allowed hosts) defaults to the process's settings, ``SAS_CODEC_SERVER__*``.
    """
    if access is None:
        from sas.settings import get_settings

        access = get_settings().codec_server
    token = access.token.get_secret_value().encode() if access.token else None

    def endpoint(name: str, transform: Transform) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def handle(request: Request) -> JSONResponse:
            refused = _refuse(request, token)
            if refused is not None:
                return refused
            return await _apply(request, name, transform)

        return handle

    routes = [
        Route(f"{prefix}/{name}", endpoint(name, transform), methods=["POST"])
        for prefix in ("", "/{namespace}")
        for name, transform in (("encode", codec.encode), ("decode", codec.decode))
    ]
    routes.append(Route("/healthz", _healthz, methods=["GET"]))
    middleware = [
        # Outermost: a request for a host name we do not serve gets nothing else, not even CORS.
        Middleware(TrustedHostMiddleware, allowed_hosts=list(access.allowed_hosts)),
        Middleware(
            CORSMiddleware,
            allow_origins=[o.rstrip("/") for o in ui_origins],
            allow_methods=["POST"],
            # What the Temporal UI sends: Content-Type, X-Namespace, and Authorization when
            # "pass access token" is on (with credentials when "include credentials" is).
            allow_headers=["content-type", "x-namespace", "authorization"],
            allow_credentials=True,
            max_age=600,
        ),
    ]
    return Starlette(routes=routes, middleware=middleware)


async def _healthz(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


def _refuse(request: Request, token: bytes | None) -> JSONResponse | None:
    """The answer for a request that may not be served, or None. The token comes first, so a
    caller without it learns nothing about what the server would accept."""
    if token is not None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        # compare_digest: the time taken does not tell how much of a guess was right.
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token):
            response = _error(401, "a valid 'Authorization: Bearer <token>' header is required")
            response.headers["WWW-Authenticate"] = 'Bearer realm="sas codec server"'
            return response
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        return _error(415, f"Content-Type must be application/json, not {media_type or 'missing'!r}")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return _error(413, f"body is over the limit of {MAX_BODY_BYTES} bytes")
    return None


async def _apply(request: Request, name: str, transform: Transform) -> JSONResponse:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return _error(413, f"body is over the limit of {MAX_BODY_BYTES} bytes")
    try:
        payloads = _parse(body)
    except ValueError as err:
        # One line for the operator, without the error's text: a payload's error may quote what
        # it was sent, and an /encode body is plaintext. The caller gets the line, never a traceback.
        log.warning("codec server answered 400 to a %s request: the body is not a payload list", name)
        return _error(400, str(err))
    try:
        out = await transform(payloads)
    except (PayloadDecryptionError, PayloadDecompressionError) as err:
        # The message names key ids only, never key material or payload bytes.
        log.warning("codec server could not %s: %s", name, err)
        return _error(422, str(err))
    log.debug("codec server %sd %d payloads", name, len(out))
    return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in out]})


def _parse(body: bytes | bytearray) -> list[Payload]:
    try:
        document = loads_strict(body)
    except StrictJsonError as err:
        raise ValueError(f'body is not JSON ({err}); expected {{"payloads": [...]}}') from None
    if not isinstance(document, dict) or not isinstance(document.get("payloads"), list):
        raise ValueError('expected a JSON object {"payloads": [...]}')
    payloads = []
    for index, item in enumerate(document["payloads"]):
        if not isinstance(item, dict):
            raise ValueError(f"payloads[{index}] is not an object")
        try:
            payloads.append(json_format.ParseDict(item, Payload()))
        except json_format.ParseError as err:
            raise ValueError(f"payloads[{index}] is not a Temporal Payload: {err}") from None
    return payloads


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)
