"""The seated trip end to end - ``([flight → seat] ‖ hotel) → charge``, a parallel group whose
flight branch is a ``Sequence`` - on a real Temporal dev server with the trip's own services,
sas's worker and Supervisor as processes, driven with ``sas``: the seat is reserved on the
booked flight while the hotel is booked beside them; the seat refused for good undoes the trip
as a whole (the hotel, still being booked, cancelled; the flight cancelled after its seat's
undo; the refused seat never released), as the services' ledger shows; and a worker killed
while the flight's branch is at its seat still ends with one effect per booking."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from sas.task_models import StepState, TaskStatus
from tests.examples.test_trip import TRIP, TripStack, trip  # noqa: F401 - the stack's fixture (trip_services: conftest)
from tests.helpers import fresh_id, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trip_example")]


async def submit(stack: TripStack, task_id: str, payload: dict[str, Any], *, wait: bool = True) -> dict[str, Any]:
    (stack.folder / f"{task_id}.json").write_text(json.dumps(payload))
    argv = ["submit", "--type", "seated_trip", "--input", f"{task_id}.json", "--id", task_id, "--json"]
    done = await stack.sas(*argv, *(["--wait"] if wait else []))
    said: dict[str, Any] = json.loads(done.stdout)
    # --wait says the outcome with its exit code: 0 done, 3 undone as a whole (docs/cli.md).
    expected = {"Processed": 0, "Compensated": 3}.get(said.get("state", "")) if wait else 0
    assert done.returncode == expected, done.stderr
    return said


async def scheduled(stack: TripStack, task_id: str) -> list[str]:
    """The Agents the workflow started, in the order its history has them."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        async for e in stack.client.get_workflow_handle(task_id).fetch_history_events()
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_the_seat_is_reserved_on_the_booked_flight_beside_the_hotel(trip: TripStack) -> None:  # noqa: F811
    task_id = fresh_id("seated")
    said = await submit(trip, task_id, {**TRIP, "seat": "window"})
    assert said["state"] == "Processed"
    ledger = await trip.ledger(task_id)
    assert sorted(ledger) == ["cards.charge", "flights.book", "hotels.book", "seats.reserve"]
    assert ledger.index("flights.book") < ledger.index("seats.reserve") and ledger[-1] == "cards.charge"
    steps = {s["name"]: s for s in said["result"]["steps"]}
    assert steps["seat"]["result"]["seat"] == "window"
    assert steps["charge"]["result"]["amount_cents"] == 12_000 + 3 * 9_000
    assert await trip.mirror(task_id) == dict.fromkeys(("flight", "seat", "hotel", "charge"), "Processed")
    summary = await (await trip.client.get_workflow_handle(task_id).describe()).static_summary()
    assert summary is not None and "([flight → seat] ‖ hotel) → charge" in summary


async def test_a_seat_refused_for_good_undoes_the_hotel_still_being_booked_and_the_flight(
    trip: TripStack,  # noqa: F811
) -> None:
    task_id = fresh_id("seated-cockpit")
    # The hotel takes 8 s (its complete-by is 20 s for this type, test_trip.py's stack): it is still
    # at the hotel when the airline refuses the seat.
    await trip.fault(endpoint="hotels.book", kind="latency", latency_ms=8_000, trip=task_id)
    said = await submit(trip, task_id, {**TRIP, "seat": "cockpit"})
    assert said["state"] == "Compensated"
    ledger = await trip.ledger(task_id)
    # Exactly this: the flight booked then cancelled, the hotel booked (its request was already at
    # the hotel) then cancelled, the seat never reserved and so never released; nothing charged.
    assert sorted(ledger) == ["flights.book", "flights.cancel", "hotels.book", "hotels.cancel"]
    assert ledger.index("flights.book") < ledger.index("flights.cancel")
    assert ledger.index("hotels.book") < ledger.index("hotels.cancel")
    assert await trip.mirror(task_id) == {
        "flight": "Compensated",
        "seat": "Compensated",
        "hotel": "Compensated",
        "charge": "Skipped",
    }
    # Latest first within the flight's branch: the seat's undo (which found nothing to release)
    # was started before the flight's cancellation.
    started = await scheduled(trip, task_id)
    assert started.index("seats.release") < started.index("flights.cancel")
    assert "cards.charge" not in started
    assert await cancel_requested(trip, task_id) == ["hotels.book"]  # cut off in flight, then undone


async def cancel_requested(stack: TripStack, task_id: str) -> list[str]:
    """The Agents whose attempt the workflow cancelled, by the history."""
    names: dict[int, str] = {}
    cancelled: list[str] = []
    async for e in stack.client.get_workflow_handle(task_id).fetch_history_events():
        if e.HasField("activity_task_scheduled_event_attributes"):
            names[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        if e.HasField("activity_task_cancel_requested_event_attributes"):
            cancelled.append(names[e.activity_task_cancel_requested_event_attributes.scheduled_event_id])
    return cancelled


async def test_a_worker_killed_mid_branch_leaves_one_effect_per_booking(trip: TripStack) -> None:  # noqa: F811
    task_id = fresh_id("seated-crash")
    await trip.fault(endpoint="seats.reserve", kind="latency", latency_ms=2_500, trip=task_id)
    await submit(trip, task_id, {**TRIP, "seat": "12a"}, wait=False)
    handle = trip.client.get_workflow_handle(task_id)

    async def status() -> TaskStatus:
        return await handle.query("status", result_type=TaskStatus)

    await wait_until(
        status,
        lambda s: {x.name: x.state for x in s.steps}["seat"] == StepState.PROCESSING,
        what="the flight's branch at its seat",
    )
    assert trip.worker is not None
    trip.worker.send_signal(signal.SIGKILL)  # no goodbye: a crash
    trip.worker.wait(30)
    trip.worker = await trip.start("worker")
    result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result["state"] == "Processed"
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book", "seats.reserve"]


# The seated trip's paths whose histories are kept in tests/histories/ (tests/replay replays them).
SEATED_HISTORIES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "seated_trip_completed": ({**TRIP, "seat": "window"}, []),
    "seated_trip_seat_refused": (
        {**TRIP, "seat": "cockpit"},
        [{"endpoint": "hotels.book", "kind": "latency", "latency_ms": 3_000}],
    ),
}


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
@pytest.mark.parametrize("name", sorted(SEATED_HISTORIES))
async def test_record(trip: TripStack, name: str) -> None:  # noqa: F811
    payload, faults = SEATED_HISTORIES[name]
    task_id = fresh_id(name.replace("_", "-"))
    for rule in faults:
        await trip.fault(**rule, trip=task_id)
    await submit(trip, task_id, payload)
    history = await trip.client.get_workflow_handle(task_id).fetch_history()
    histories = Path(__file__).resolve().parents[1] / "histories"
    (histories / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
