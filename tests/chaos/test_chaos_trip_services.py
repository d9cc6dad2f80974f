"""The chaos trip's services (bench/_chaos_trip_services.py) hold the HTTP contract the chaos
run's left_behind check relies on, as a real process on loopback: one effect per key, an undo
and a lookup's "nothing" each void the forward key, an undo must name the effect, both siblings
of a trip to Atlantis refuse it, and the ledger survives ``kill -9``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until

ROOT = Path(__file__).resolve().parents[2]


class Services:
    def __init__(self, ledger: Path, *faults: str) -> None:
        self.ledger, self.faults, self.port = ledger, faults, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "bench._chaos_trip_services", "--port", str(self.port)]
        self.process = subprocess.Popen([*argv, "--ledger", str(self.ledger), *self.faults], cwd=ROOT)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)

    async def ready(self) -> None:
        async def healthy() -> bool:
            try:
                async with httpx.AsyncClient() as http:
                    return (await http.get(f"{self.url}/healthz", timeout=2)).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(healthy, timeout=60, what="the trip services' /healthz")


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(tmp_path / "ledger.db")
    running.start()
    yield running
    running.kill()


async def _post(url: str, path: str, key: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return await http.post(path, json=body, headers={"Idempotency-Key": key})


async def _get(url: str, path: str, **params: str) -> Any:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        return (await http.get(path, params=params)).json()


@pytest.mark.timeout(120)
async def test_one_effect_per_key_the_undo_voids_and_the_ledger_survives_kill_9(services: Services) -> None:
    await services.ready()
    trip = fresh_id("trip")
    book = {"trip": trip, "traveller": "Ada", "destination": "Lisbon"}
    first = await _post(services.url, "/chaos_air/book", f"{trip}:flight", book)
    again = await _post(services.url, "/chaos_air/book", f"{trip}:flight", book)
    assert first.status_code == 200 and again.json() == first.json()
    booking = first.json()["booking_id"]

    # An undo must name the effect done under its forward key.
    undo = {"trip": trip, "forward_key": f"{trip}:flight"}
    wrong = await _post(services.url, "/chaos_air/cancel", f"{trip}:flight:undo", {**undo, "booking_id": "fl_other"})
    assert wrong.status_code == 422 and wrong.json()["error"] == "wrong_booking_id"

    services.kill()  # committed effects and answers stay
    services.start()
    await services.ready()
    assert (await _post(services.url, "/chaos_air/book", f"{trip}:flight", book)).json() == first.json()
    cancelled = await _post(services.url, "/chaos_air/cancel", f"{trip}:flight:undo", {**undo, "booking_id": booking})
    assert cancelled.json() == {"undone": True}
    books = await _get(services.url, "/ledger")
    ours = [(e["action"], e["idempotency_key"], e["target_key"]) for e in books["entries"] if e["order_id"] == trip]
    assert ours == [("book_flight", f"{trip}:flight", None), ("cancel_flight", f"{trip}:flight:undo", f"{trip}:flight")]
    assert {"service": "chaos_air", "key": f"{trip}:flight", "by_key": f"{trip}:flight:undo"} in books["voids"]


@pytest.mark.timeout(120)
async def test_a_lookup_that_finds_nothing_voids_the_key_and_atlantis_is_refused_by_both(services: Services) -> None:
    await services.ready()
    trip = fresh_id("trip")
    nothing = await _get(services.url, "/chaos_hotel/lookup", idempotency_key=f"{trip}:hotel")
    assert nothing == {"booking_id": None}
    late = await _post(
        services.url, "/chaos_hotel/book", f"{trip}:hotel", {"trip": trip, "destination": "Rome", "nights": 2}
    )
    assert late.status_code == 409 and late.json()["error"] == "voided"

    other = fresh_id("trip")
    for path, error in (("/chaos_air/book", "no_route"), ("/chaos_hotel/book", "no_hotel")):
        body = {"trip": other, "traveller": "Ada", "destination": "Atlantis", "nights": 1}
        refused = await _post(services.url, path, f"{other}:{path.split('/')[1]}", body)
        assert refused.status_code == 422 and refused.json()["error"] == error
    assert [e for e in (await _get(services.url, "/ledger"))["entries"] if e["order_id"] in (trip, other)] == []


@pytest.mark.timeout(120)
async def test_faults_come_from_the_command_line_and_are_counted(tmp_path: Path) -> None:
    declining = Services(tmp_path / "ledger.db", "--decline", "1", "--fault-seed", "3")
    declining.start()
    try:
        await declining.ready()
        trip = fresh_id("trip")
        body = {"trip": trip, "flight_cents": 100, "hotel_cents": 200}
        declined = await _post(declining.url, "/chaos_bank/charge", f"{trip}:charge", body)
        assert declined.status_code == 402 and declined.json()["error"] == "card_declined"
        # Declines are for charges only: an undo is never declined.
        undo = {"trip": trip, "forward_key": f"{trip}:charge"}
        assert (await _post(declining.url, "/chaos_bank/refund", f"{trip}:charge:undo", undo)).json() == {
            "undone": False
        }
        assert await _get(declining.url, "/faults") == {"hits": {"decline": 1}}
    finally:
        declining.kill()


@pytest.mark.timeout(120)
async def test_a_lookup_during_a_slow_booking_never_says_nothing_of_an_effect_that_then_happens(
    services: Services,
) -> None:
    """A flight to Nowhere is served slowly (2 s). A lookup sent meanwhile either waits for it
    and finds the booking, or, had it come first, voids the key and the booking is refused:
    never "nothing" with a booking after it."""
    await services.ready()
    trip = fresh_id("trip")
    body = {"trip": trip, "traveller": "Ada", "destination": "Nowhere"}
    booking = asyncio.create_task(_post(services.url, "/chaos_air/book", f"{trip}:flight", body))
    found = await _get(services.url, "/chaos_air/lookup", idempotency_key=f"{trip}:flight")
    booked = await booking
    if found["booking_id"] is None:
        assert booked.status_code == 409 and booked.json()["error"] == "voided"
    else:
        assert booked.status_code == 200 and found == booked.json()
    entries = [e for e in (await _get(services.url, "/ledger"))["entries"] if e["order_id"] == trip]
    assert len(entries) == (found["booking_id"] is not None)
