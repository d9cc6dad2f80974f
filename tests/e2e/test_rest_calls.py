"""REST calls declared as data, on a dev server against a REST service of a few lines: a path
parameter, a declared header and query parameter, a result picked out of a nested answer, GET
and DELETE; a path parameter that could change the path is refused for good, nothing sent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client

from sas.settings import ServiceSettings, ServicesSettings, get_settings
from sas.task_models import MirrorStamp, StepCall, TaskResult, TaskState
from sas.task_types.services import HttpCall, UnsafeValue
from sas.workflows import registry
from tests.e2e.rest_booking import BOOK
from tests.helpers import fresh_id, serving
from tests.stack import ADMIN_TOKEN, Stack, start_stack

Seen = list[tuple[str, str, dict[str, Any]]]


def rooms_service(seen: Seen) -> Starlette:
    """Answers by the contract (docs/http-contract.md), REST-shaped; keeps what it was sent."""
    done: dict[str, dict[str, Any]] = {}

    async def book(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        seen.append(
            (
                "book",
                request.url.path,
                {
                    "tenant": request.headers.get("x-tenant"),
                    "stay": request.headers.get("x-stay"),
                    "currency": request.query_params.get("currency"),
                    **(await request.json()),
                },
            )
        )
        if key not in done:
            nights = (await request.json())["nights"]
            done[key] = {"data": {"booking": {"id": f"bk_{len(done)}", "price": {"cents": 9_000 * nights}}}}
        return JSONResponse(done[key])

    async def unbook(request: Request) -> Response:
        seen.append(("unbook", request.url.path, {}))
        return JSONResponse({"deleted": True})

    async def view(request: Request) -> Response:
        seen.append(("view", request.url.path, {}))
        return JSONResponse({"error": "no_view", "message": "no room has a view"}, status_code=422)

    async def lookup(request: Request) -> Response:
        return JSONResponse({"booking_id": None})

    return Starlette(
        routes=[
            Route("/hotels/{hotel}/bookings", book, methods=["PUT"]),
            Route("/bookings/{booking_id}", unbook, methods=["DELETE"]),
            Route("/views/{hotel}", view, methods=["GET"]),
            Route("/rooms/lookup", lookup, methods=["GET"]),
        ]
    )


@pytest.fixture
def stay_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.rest_booking")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest_asyncio.fixture
async def rooms() -> AsyncIterator[tuple[str, Seen]]:
    seen: Seen = []
    async with serving(rooms_service(seen), "the rooms service") as url:
        yield url, seen


@asynccontextmanager
async def stay_stack(
    url: str, client: Client, temporal_address: str, services: Any, sqlite_url: str
) -> AsyncIterator[Stack]:
    """A worker stack whose rooms service is the test's own."""
    where = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, rooms=ServiceSettings(url=url))  # type: ignore[call-arg]
    async with start_stack(client, temporal_address, services.url, sqlite_url, services=where) as stack:
        yield stack


async def test_a_rest_booking_is_made_and_deleted_by_its_id_when_a_later_step_is_refused(
    stay_type: None, rooms: tuple[str, Seen], client: Client, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    url, seen = rooms
    async with stay_stack(url, client, temporal_address, services, sqlite_url) as stack:
        task_id = fresh_id("stay")
        payload = {"hotel": "grand-lisboa", "nights": 2, "currency": "EUR"}
        result: TaskResult = await (await stack.submit(task_id, payload, "StayWorkflow")).result()
    assert result.state == TaskState.COMPENSATED
    book = next(s for s in result.steps if s.name == "book")
    assert book.result == {"booking_id": "bk_0", "total_cents": 18_000}  # picked from data.booking
    assert seen == [
        (
            "book",
            "/hotels/grand-lisboa/bookings",
            {"tenant": "acme", "stay": task_id, "currency": "EUR", "nights": 2},
        ),
        ("view", "/views/grand-lisboa", {}),
        ("unbook", "/bookings/bk_0", {}),
    ]


async def test_a_path_parameter_that_could_change_the_path_is_refused_for_good_and_nothing_is_sent(
    stay_type: None, rooms: tuple[str, Seen], client: Client, temporal_address: str, services: Any, sqlite_url: str
) -> None:
    url, seen = rooms
    async with stay_stack(url, client, temporal_address, services, sqlite_url) as stack:
        task_id = fresh_id("stay-escape")
        payload = {"hotel": "../admin", "nights": 1}
        result: TaskResult = await (await stack.submit(task_id, payload, "StayWorkflow")).result()
    assert result.state == TaskState.COMPENSATED
    book = next(s for s in result.steps if s.name == "book")
    assert book.last_error is not None and "could change the path" in book.last_error
    assert seen == []  # nothing reached the service, and nothing was undone


@pytest.mark.parametrize("value", ["../admin", "a/b", "%2e%2e", "x%2Fy", "back\\slash", "..", "", "line\nbreak"])
def test_each_unsafe_path_value_is_refused(value: str) -> None:
    call = StepCall(
        task_id="t",
        task_type="stay",
        step="book",
        position=0,
        idempotency_key="t:book",
        payload={"hotel": value, "nights": 1},
        stamp=MirrorStamp(seq=1),
    )
    assert isinstance(BOOK.forward, HttpCall)
    with pytest.raises(UnsafeValue):
        BOOK.forward.build_path(call)


def test_a_safe_value_is_encoded_as_one_segment() -> None:
    call = StepCall(
        task_id="t",
        task_type="stay",
        step="book",
        position=0,
        idempotency_key="t:book",
        payload={"hotel": "Grand Hôtel & Spa?", "nights": 1},
        stamp=MirrorStamp(seq=1),
    )
    assert isinstance(BOOK.forward, HttpCall)
    assert BOOK.forward.build_path(call) == "/hotels/Grand%20H%C3%B4tel%20%26%20Spa%3F/bookings"
