"""The trip example end to end, as a team would run it: the package installed with pip (its
``sas.task_types`` entry point), its own services (``sas-trip-services``), and sas's worker and
Supervisor as processes on a real Temporal dev server - driven from ``sas submit --type trip
--input`` and from the plain ``temporal`` CLI. What it must show: the happy path, a permanent
failure that undoes what was done (and sends no undo of the refused booking), also while a
sibling's call is still being served, a transient
fault retried with one effect, and a worker killed mid-task."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from sas.task_models import StepState, TaskStatus
from tests.conftest import temporal_binary
from tests.examples.example_stack import ExampleStack, example_stack
from tests.helpers import fresh_id, wait_until

# One stack (services, worker, Supervisor) for the module: its tests stay on one xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trip_example")]

TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 3}


class TripStack(ExampleStack):
    async def submit(self, task_id: str, trip: dict[str, Any]) -> dict[str, Any]:
        return await self.submit_as("trip", task_id, trip)

    async def ledger(self, task_id: str) -> list[str]:
        return [e["action"] for e in await self.entries(trip=task_id)]


@pytest_asyncio.fixture(scope="module")
async def trip(
    client: Client, temporal_address: str, trip_services: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[TripStack]:
    async with example_stack(
        TripStack,
        client,
        temporal_address,
        trip_services,
        tmp_path_factory.mktemp("trip"),
        # The ticketed trip's tickets (test_ticketed_trip.py) and the seated trip's seats (test_seated_trip.py) too.
        services=("flights", "hotels", "cards", "tickets", "seats"),
        # The seated trip's hotel is slowed to 8 s there, to be surely still at the hotel when the seat is refused.
        settings={"SAS_STEPS__SEATED_TRIP__HOTEL__COMPLETE_BY_S": "20"},
    ) as stack:
        yield stack


async def test_a_trip_submitted_with_sas_books_both_then_charges(trip: TripStack) -> None:
    task_id = fresh_id("trip")
    result = await trip.submit(task_id, TRIP)
    assert result["state"] == "Processed"
    ledger = await trip.ledger(task_id)
    assert sorted(ledger[:2]) == ["flights.book", "hotels.book"] and ledger[2:] == ["cards.charge"]
    charge = next(s for s in result["steps"] if s["name"] == "charge")
    assert charge["result"]["amount_cents"] == 12_000 + 3 * 9_000  # the fare and three nights
    # The UI's list shows the type, its flow and the task, as for any task sas submits.
    summary = await (await trip.client.get_workflow_handle(task_id).describe()).static_summary()
    assert summary is not None and summary.startswith(f"trip {task_id}") and "(flight ‖ hotel) → charge" in summary
    assert await trip.mirror(task_id) == {"flight": "Processed", "hotel": "Processed", "charge": "Processed"}


async def test_a_hotel_refused_for_good_undoes_the_flight_and_sends_no_undo_of_the_hotel(trip: TripStack) -> None:
    task_id = fresh_id("trip-nowhere")
    result = await trip.submit(task_id, {**TRIP, "destination": "Nowhere"})
    assert result["state"] == "Compensated"
    # The flight was booked, then cancelled once; the hotel said no (422), so its undo is not
    # sent (its lookup says nothing was done under the key); the charge never started.
    assert sorted(await trip.ledger(task_id)) == ["flights.book", "flights.cancel"]
    assert await trip.mirror(task_id) == {"flight": "Compensated", "hotel": "Compensated", "charge": "Skipped"}


async def test_a_flight_still_being_booked_when_the_hotel_is_refused_is_not_left_behind(trip: TripStack) -> None:
    """The hotel says no at once while the airline takes 3 s over the flight: the flight's
    attempt is cancelled, yet its request is already at the airline, which books it. Undone as
    a whole means that booking is cancelled too, not found missing by a lookup made too early."""
    task_id = fresh_id("trip-slow-flight")
    await trip.fault(endpoint="flights.book", kind="latency", latency_ms=3_000, trip=task_id)
    result = await trip.submit(task_id, {**TRIP, "destination": "Nowhere"})
    assert result["state"] == "Compensated"
    assert await trip.ledger(task_id) == ["flights.book", "flights.cancel"]
    assert await trip.mirror(task_id) == {"flight": "Compensated", "hotel": "Compensated", "charge": "Skipped"}


async def test_a_lost_answer_is_retried_with_one_effect(trip: TripStack) -> None:
    task_id = fresh_id("trip-lost")
    await trip.fault(endpoint="cards.charge", kind="lost_response", trip=task_id)  # done, then a 500
    result = await trip.submit(task_id, TRIP)
    assert result["state"] == "Processed"
    assert (await trip.ledger(task_id)).count("cards.charge") == 1  # the retry got the stored answer
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in trip.client.get_workflow_handle(task_id).fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) == 2


async def test_a_worker_killed_mid_trip_leaves_one_effect_per_booking(trip: TripStack) -> None:
    task_id = fresh_id("trip-crash")
    for endpoint in ("flights.book", "hotels.book"):
        await trip.fault(endpoint=endpoint, kind="latency", latency_ms=2_500, trip=task_id)
    (trip.folder / f"{task_id}.json").write_text(json.dumps(TRIP))
    submitted = await trip.sas("submit", "--type", "trip", "--input", f"{task_id}.json", "--id", task_id, "--json")
    assert submitted.returncode == 0, submitted.stderr
    handle = trip.client.get_workflow_handle(task_id)

    async def status() -> TaskStatus:
        return await handle.query("status", result_type=TaskStatus)

    await wait_until(
        status,
        lambda s: [x.state for x in s.steps[:2]] == [StepState.PROCESSING, StepState.PROCESSING],
        what="both bookings in flight",
    )
    assert trip.worker is not None
    trip.worker.send_signal(signal.SIGKILL)  # no goodbye: a crash
    trip.worker.wait(30)
    trip.worker = await trip.start("worker")
    result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result["state"] == "Processed"
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]


async def test_a_trip_started_from_the_temporal_cli_completes(trip: TripStack) -> None:
    task_id = fresh_id("trip-cli")
    argv = [
        temporal_binary(),
        "workflow",
        "start",
        "--type",
        "TripWorkflow",
        "--task-queue",
        trip.env["SAS_TEMPORAL__TASK_QUEUE"],
        "--workflow-id",
        task_id,
        "--input",
        json.dumps(TRIP),
        "--address",
        trip.env["SAS_TEMPORAL__ADDRESS"],
    ]
    started = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    result = await asyncio.wait_for(trip.client.get_workflow_handle(task_id).result(), timeout=120)
    assert result["state"] == "Processed"
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]


# The trip's paths whose histories are kept in tests/histories/ (tests/replay replays them with the
# current code): a trip declared before a change must still replay after it.
TRIP_HISTORIES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "trip_completed": (TRIP, []),
    "trip_hotel_refused": ({**TRIP, "destination": "Nowhere"}, []),
    "trip_slow_flight_hotel_refused": (
        {**TRIP, "destination": "Nowhere"},
        [{"endpoint": "flights.book", "kind": "latency", "latency_ms": 3_000}],
    ),
}


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
@pytest.mark.parametrize("name", sorted(TRIP_HISTORIES))
async def test_record(trip: TripStack, name: str) -> None:
    payload, faults = TRIP_HISTORIES[name]
    task_id = fresh_id(name.replace("_", "-"))
    for rule in faults:
        await trip.fault(**rule, trip=task_id)
    await trip.submit(task_id, payload)
    history = await trip.client.get_workflow_handle(task_id).fetch_history()
    histories = Path(__file__).resolve().parents[1] / "histories"
    (histories / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
