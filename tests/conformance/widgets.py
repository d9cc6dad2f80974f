"""A small service that meets sas's HTTP contract, and the same service broken in one way at a
time, for the conformance kit to tell apart. Each way is served under its own path prefix:
``/<mode>/make`` (the forward), ``/<mode>/unmake`` (its undo), ``/<mode>/lookup``, and
``/<mode>/slow`` (holds the next forward under a key, as a service's fault injection would).

Modes: ``good``, and each one breaks one clause:

- ``new-effect-on-replay``: no idempotency store; a repeat makes a new widget;
- ``html-success``: a make answers 200 with an HTML page;
- ``refusal-not-json``: a refusal is a 422 in plain text;
- ``lookup-does-not-void``: "nothing" leaves the key open;
- ``undo-does-not-void``: an undo that comes first leaves the key open;
- ``undo-refuses-nothing``: an undo of a key never used is a 404;
- ``lookup-ignores-in-flight``: the lookup takes no lock, so it says "nothing" of a make still
  being served, which then takes effect.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

MODES = (
    "good",
    "new-effect-on-replay",
    "html-success",
    "refusal-not-json",
    "lookup-does-not-void",
    "undo-does-not-void",
    "undo-refuses-nothing",
    "lookup-ignores-in-flight",
)
# A make whose colour is this is refused for good: the business rule the tests name.
REFUSED_COLOUR = "ultraviolet"


@dataclass
class Widgets:
    mode: str
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    effects: list[str] = field(default_factory=list)
    voided: set[str] = field(default_factory=set)
    slow: dict[str, float] = field(default_factory=dict)
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    auth: set[str] = field(default_factory=set)  # the Authorization headers the makes carried

    def lock(self, key: str) -> asyncio.Lock:
        return self.locks.setdefault(key, asyncio.Lock())


def _refusal(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


def _make(w: Widgets) -> Callable[[Request], Awaitable[Response]]:
    async def make(request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        body = await request.json()
        w.auth.add(request.headers.get("Authorization", ""))
        async with w.lock(key):
            if key in w.answers and w.mode != "new-effect-on-replay":
                return JSONResponse(w.answers[key])
            if key in w.voided:
                return _refusal(409, "voided", f"{key} was voided before it arrived")
            if body.get("colour") == REFUSED_COLOUR:
                if w.mode == "refusal-not-json":
                    return PlainTextResponse("no such colour", status_code=422)
                return _refusal(422, "no_such_colour", "widgets do not come in ultraviolet")
            await asyncio.sleep(w.slow.pop(key, 0.0))
            if w.mode == "html-success":
                return HTMLResponse("<html><body>made it!</body></html>")
            answer = {"widget_id": f"wd_{uuid.uuid4().hex[:12]}", "colour": body.get("colour")}
            w.answers[key] = answer
            w.effects.append(key)
            return JSONResponse(answer)

    return make


def _unmake(w: Widgets) -> Callable[[Request], Awaitable[Response]]:
    async def unmake(request: Request) -> Response:
        body = await request.json()
        forward_key = str(body.get("make_key") or "")
        async with w.lock(forward_key):
            done = w.answers.get(forward_key)
            if done is None and w.mode == "undo-refuses-nothing":
                return _refusal(404, "unknown_widget", "no widget was made under that key")
            if done is None and w.mode != "undo-does-not-void":
                w.voided.add(forward_key)
            return JSONResponse({"unmade": done is not None})

    return unmake


def _lookup(w: Widgets) -> Callable[[Request], Awaitable[Response]]:
    async def lookup(request: Request) -> Response:
        key = request.query_params.get("idempotency_key", "")

        def answer() -> Response:
            found = w.answers.get(key)
            if found is None and w.mode != "lookup-does-not-void":
                w.voided.add(key)
            return JSONResponse({"widget_id": found["widget_id"] if found else None})

        if w.mode == "lookup-ignores-in-flight":
            return answer()
        async with w.lock(key):
            return answer()

    return lookup


def _slow(w: Widgets) -> Callable[[Request], Awaitable[Response]]:
    async def slow(request: Request) -> Response:
        rule = await request.json()
        w.slow[str(rule["key"])] = float(rule["seconds"])
        return JSONResponse({"ok": True})

    return slow


def create_app() -> tuple[Starlette, dict[str, Widgets]]:
    """The app, and each mode's state (to count the effects)."""
    state = {mode: Widgets(mode) for mode in MODES}
    routes = []
    for mode, w in state.items():
        routes += [
            Route(f"/{mode}/make", _make(w), methods=["POST"]),
            Route(f"/{mode}/unmake", _unmake(w), methods=["POST"]),
            Route(f"/{mode}/lookup", _lookup(w), methods=["GET"]),
            Route(f"/{mode}/slow", _slow(w), methods=["POST"]),
        ]
    return Starlette(routes=routes), state
