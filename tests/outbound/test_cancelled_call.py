"""An attempt cancelled while its request is at the service (activities/remote.py): the request
is not dropped but answered first, so that when the attempt ends the service has done what it
will do under the key, and the undo that follows is decided on that. A request still waiting
for a slot of its service was never sent: it stops at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import pytest_asyncio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sas.activities.remote import RemoteCaller
from sas_demo_services.launcher import free_port
from tests.helpers import wait_until


@dataclass
class SlowService:
    url: str
    received: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)


@pytest_asyncio.fixture
async def slow() -> AsyncIterator[SlowService]:
    port = free_port()
    service = SlowService(f"http://127.0.0.1:{port}")

    async def book(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        service.received.append(key)
        await service.release.wait()  # served until the test lets it answer
        service.answered.append(key)
        return JSONResponse({"booking_id": f"bk-{key}"})

    app = Starlette(routes=[Route("/flights/book", book, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(server.serve())

    async def started() -> bool:
        return bool(server.started)

    await wait_until(started, timeout=30, what="the slow service")
    try:
        yield service
    finally:
        service.release.set()
        server.should_exit = True
        await serving


def _deadline() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=30)


async def test_a_cancelled_call_ends_only_once_the_service_has_answered(slow: SlowService) -> None:
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(client, slow.url)
        call = asyncio.ensure_future(caller.post("/flights/book", {}, "trip-1:flight", _deadline()))
        await wait_until(lambda: _value(slow.received), timeout=10, interval=0.01, what="the request at the service")
        call.cancel()
        # Given the time to stop, it does not: the request is not taken back from the service.
        await asyncio.wait([call], timeout=1.0)
        slow.release.set()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert slow.answered == ["trip-1:flight"]  # by the time the call ended


async def test_a_call_cancelled_while_waiting_for_a_slot_is_never_sent(slow: SlowService) -> None:
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(client, slow.url, max_concurrency=1)
        first = asyncio.ensure_future(caller.post("/flights/book", {}, "trip-2:flight", _deadline()))
        await wait_until(lambda: _value(slow.received), timeout=10, interval=0.01, what="the first request")
        second = asyncio.ensure_future(caller.post("/flights/book", {}, "trip-3:flight", _deadline()))
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        slow.release.set()
        assert (await first)["booking_id"] == "bk-trip-2:flight"
        assert slow.received == ["trip-2:flight"]


async def _value(value: object) -> object:
    return value
