"""The trip's own services against the lookup's rule of the HTTP contract (docs/http-contract.md):
its "nothing done" is final, and it is given only once a request being served under the key
has ended. In process, over the app's ASGI interface."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from sas_trip.services import Ledger, create_app
from tests.helpers import fresh_id, wait_until

BOOKING = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01"}


@pytest_asyncio.fixture
async def ledger() -> Ledger:
    return Ledger()


@pytest_asyncio.fixture
async def http(ledger: Ledger) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(ledger))
    async with httpx.AsyncClient(transport=transport, base_url="http://trip", timeout=10.0) as client:
        yield client


async def _book(http: httpx.AsyncClient, key: str) -> httpx.Response:
    return await http.post(
        "/flights/book", json={"trip": key.split(":")[0], **BOOKING}, headers={"Idempotency-Key": key}
    )


async def _entries(http: httpx.AsyncClient, trip: str) -> list[str]:
    return [e["action"] for e in (await http.get("/ledger", params={"trip": trip})).json()["entries"]]


async def test_a_lookup_that_finds_nothing_voids_the_key(http: httpx.AsyncClient) -> None:
    trip = fresh_id("trip")
    key = f"{trip}:flight"
    found = await http.get("/flights/lookup", params={"idempotency_key": key})
    assert found.json()["booking_id"] is None
    late = await _book(http, key)
    assert late.status_code == 409 and late.json()["error"] == "voided"
    assert await _entries(http, trip) == []


async def test_a_lookup_waits_for_a_booking_being_served_under_its_key(http: httpx.AsyncClient, ledger: Ledger) -> None:
    trip = fresh_id("trip")
    key = f"{trip}:flight"
    await http.post(
        "/admin/faults", json={"endpoint": "flights.book", "kind": "latency", "latency_ms": 1000, "trip": trip}
    )
    booking = asyncio.ensure_future(_book(http, key))

    async def being_served() -> bool:
        lock = ledger.locks.get(key)
        return lock is not None and lock.locked()

    await wait_until(being_served, timeout=10, interval=0.01, what="the booking being served under its key")
    found = await http.get("/flights/lookup", params={"idempotency_key": key})
    booked = await booking
    assert booked.status_code == 200
    assert found.json()["booking_id"] == booked.json()["booking_id"]
    assert await _entries(http, trip) == ["flights.book"]


async def test_an_undo_that_arrives_before_its_booking_voids_the_key(http: httpx.AsyncClient) -> None:
    trip = fresh_id("trip")
    key = f"{trip}:flight"
    undo = {"booking_id": None, "book_key": key}
    cancelled = await http.post("/flights/cancel", json=undo, headers={"Idempotency-Key": f"{key}:undo"})
    assert cancelled.status_code == 200 and cancelled.json() == {"cancelled": False}
    late = await _book(http, key)
    assert late.status_code == 409 and late.json()["error"] == "voided"
    assert await _entries(http, trip) == ["flights.cancel"]  # the undo's own record; no booking
