"""An attempt cancelled while its request is being served is waited for before its undo is
decided (``FORWARD_CANCELLATION`` in sas/workflows/shell/agents.py), on a dev server.

The desk service here keeps the contract as it was before the lookup had to wait or void
(docs/http-contract.md, "Undone as a whole"): its lookup answers "nothing" at once, even while a
booking under that key is still being served, and voids nothing. The booking is held at the desk
until the task is being undone, and lands after the cancel. Waiting for the cancelled attempt
to end, the undo finds the booking and cancels it; not waiting (``TRY_CANCEL``), the undo asks the
lookup while the booking is still held, hears "nothing", sends no undo, and the booking lands
after the task is Compensated: left behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from sas.api import TaskState
from sas.api.client import TaskClient
from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.workflows import registry
from tests.helpers import fresh_id, serving, wait_until
from tests.stack import ADMIN_TOKEN, STEADY_STEP, start_stack

# How long the desk still serves a booking once the task is being undone, when no lookup comes
# first: well within the attempt's complete-by, and long enough that an undo not waiting for the
# attempt asks the lookup before the booking lands.
HOLD_AFTER_UNDO_S = 6.0
# The booking's complete-by: far beyond the hold, so the attempt ends by its answer, not cut off.
BOOKING_STEP = STEADY_STEP.model_copy(update={"complete_by_s": 60.0, "heartbeat_s": 5.0})


@dataclass
class Desk:
    """What the desk did, in order, and its ledger: each booking and whether it was cancelled."""

    events: list[str] = field(default_factory=list)
    bookings: dict[str, str] = field(default_factory=dict)  # forward key -> booking id
    cancelled: set[str] = field(default_factory=set)
    held: dict[str, asyncio.Event] = field(default_factory=dict)  # a booking being served, until set
    served: set[str] = field(default_factory=set)

    def release_in(self, key: str, seconds: float) -> None:
        asyncio.get_running_loop().call_later(seconds, self.held[key].set)

    def left_behind(self) -> list[str]:
        return [b for b in self.bookings.values() if b not in self.cancelled]


def desk_service(desk: Desk) -> Starlette:
    async def book(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        if key not in desk.bookings:
            desk.events.append("book arrived")
            release = desk.held.setdefault(key, asyncio.Event())
            await release.wait()  # still being served: the booking is made only now
            desk.bookings[key] = f"bk-{len(desk.bookings) + 1}"
            desk.events.append("booked")
        desk.served.add(key)
        return JSONResponse({"booking_id": desk.bookings[key]})

    async def lookup(request: Request) -> Response:
        key = request.query_params["idempotency_key"]
        found = desk.bookings.get(key)  # at once, whether or not a booking is being served
        desk.events.append(f"lookup: {found or 'nothing'}")
        if key in desk.held:
            desk.held[key].set()  # the booking still being served lands right after this answer
        return JSONResponse({"booking_id": found})

    async def cancel(request: Request) -> Response:
        booking = (await request.json()).get("booking_id")
        if booking:
            desk.cancelled.add(booking)
        desk.events.append(f"cancel: {booking or 'nothing'}")
        return JSONResponse({"ok": True})

    async def confirm(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/desk/book", book, methods=["POST"]),
            Route("/desk/lookup", lookup, methods=["GET"]),
            Route("/desk/cancel", cancel, methods=["POST"]),
            Route("/desk/confirm", confirm, methods=["POST"]),
        ]
    )


@pytest.fixture
def desk_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.late_booking")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def desk() -> AsyncIterator[tuple[str, Desk]]:
    state = Desk()
    async with serving(desk_service(state), "the desk service") as url:
        yield url, state


async def test_a_booking_that_lands_after_the_cancel_is_undone_not_left_behind(
    desk_type: None, desk: tuple[str, Desk], client: Client, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    url, state = desk
    where = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, desk=ServiceSettings(url=url))  # type: ignore[call-arg]
    # No Supervisor: the operator's compensate is what begins the undo, at a moment the test picks.
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, services=where, default_step=BOOKING_STEP
    ) as stack:
        tasks = TaskClient(stack.client, stack.settings, actor="desk-test")
        task_id = fresh_id("desk")
        key = f"{task_id}:book"
        await tasks.submit("desk_booking", {"guest": "Ada"}, task_id=task_id)
        await wait_until(lambda: _arrived(state, key), timeout=60, what="the booking at the desk")

        await tasks.compensate(task_id, reason="the guest cancelled")
        # The case this test is about: the undo began while the booking was still being served.
        assert key not in state.served, state.events
        state.release_in(key, HOLD_AFTER_UNDO_S)

        outcome = await tasks.wait(task_id)
        # However the attempt's request ended, it has ended before anything is judged here.
        await wait_until(lambda: _served(state, key), timeout=60, what="the booking to be served")

    assert outcome.state == TaskState.COMPENSATED, outcome
    assert state.left_behind() == [], f"a booking left behind after its task was Compensated: {state.events}"
    # Booked before the undo asked anything, then cancelled by its id.
    assert state.events[:2] == ["book arrived", "booked"] and "cancel: bk-1" in state.events, state.events


async def _arrived(state: Desk, key: str) -> bool:
    return key in state.held


async def _served(state: Desk, key: str) -> bool:
    return key in state.served
