"""The codec server: Temporal's "remote codec" HTTP protocol, so the Temporal UI and CLI
can show decrypted payloads to whoever runs it (and only to them).

POST /encode and /decode (also /{namespace}/encode|decode, for the CLI's
``--codec-endpoint`` templating) take and return ``{"payloads": [...]}`` in protobuf
JSON (bytes as base64). Anyone who can reach it can decrypt what they send it: it
binds to loopback by default and allows cross-origin calls only from the UI's origin.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from temporalio.api.common.v1 import Payload

from payload_codec.codec import EncryptionCodec, PayloadDecryptionError

log = logging.getLogger("sas.codec_server")

# A history page the UI decodes is far smaller; this only stops a runaway request.
MAX_BODY_BYTES = 16 * 1024 * 1024

Transform = Callable[[Sequence[Payload]], Awaitable[list[Payload]]]


def build_codec_app(codec: EncryptionCodec, ui_origins: Sequence[str]) -> Starlette:
    """The ASGI app; ``ui_origins`` are the Temporal UI origins allowed to call it from a browser."""

    def endpoint(name: str, transform: Transform) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def handle(request: Request) -> JSONResponse:
            return await _apply(request, name, transform)

        return handle

    routes = [
        Route(f"{prefix}/{name}", endpoint(name, transform), methods=["POST"])
        for prefix in ("", "/{namespace}")
        for name, transform in (("encode", codec.encode), ("decode", codec.decode))
    ]
    cors = Middleware(
        CORSMiddleware,
        allow_origins=[o.rstrip("/") for o in ui_origins],
        allow_methods=["POST"],
        # The UI sends X-Namespace, and Authorization when "pass access token" is on.
        allow_headers=["content-type", "x-namespace", "authorization"],
        allow_credentials=True,
        max_age=600,
    )
    return Starlette(routes=routes, middleware=[cors])


async def _apply(request: Request, name: str, transform: Transform) -> JSONResponse:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return _error(413, f"body is over the limit of {MAX_BODY_BYTES} bytes")
    try:
        payloads = _parse(body)
    except ValueError as err:
        return _error(400, str(err))
    try:
        out = await transform(payloads)
    except PayloadDecryptionError as err:
        # The message names key ids only, never key material or payload bytes.
        log.warning("codec server could not %s: %s", name, err)
        return _error(422, str(err))
    log.debug("codec server %sd %d payloads", name, len(out))
    return JSONResponse({"payloads": [json_format.MessageToDict(p) for p in out]})


def _parse(body: bytes | bytearray) -> list[Payload]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
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
