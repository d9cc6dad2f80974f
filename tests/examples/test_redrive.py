"""``sas redrive`` end to end on the ticketed trip - ``(flight ‖ hotel) → charge (pivot) →
tickets`` - on a real Temporal dev server with the trip's own services, sas's worker and
Supervisor as processes. The trip is closed from outside while its tickets wait for an
operator: past the pivot, nothing is undone and it stays in Error. ``sas resubmit`` would book
and charge it all again; a redrive from the tickets keeps the bookings and the charge, issues
the tickets once, and the trip ends Processed. The dry run and the refusal change nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from sas.task_models import StepState, TaskStatus
from tests.examples.test_ticketed_trip import parked, shown, submit
from tests.examples.test_trip import TRIP, TripStack, trip  # noqa: F401 - the stack's fixture (trip_services: conftest)
from tests.helpers import fresh_id, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trip_example")]


async def closed_past_the_pivot(trip: TripStack, task_id: str) -> None:  # noqa: F811
    """The trip's tickets refused by an airline that is down, parked, and the trip's workflow
    terminated: the Supervisor says nothing was undone."""
    await trip.fault(endpoint="tickets.issue", kind="unavailable", times=1_000, trip=task_id)
    await submit(trip, task_id, TRIP)
    await parked(trip, task_id)
    await trip.client.get_workflow_handle(task_id).terminate("closed by mistake")

    async def alerts() -> list[dict[str, Any]]:
        listed = await trip.sas("alerts", "--json")
        return [a for a in json.loads(listed.stdout) if a["task_id"] == task_id]

    def closed(listed: list[dict[str, Any]]) -> bool:
        return any(a["kind"] == "closed_past_pivot" for a in listed)

    await wait_until(alerts, closed, timeout=120, what="the alert that the trip was closed past its pivot")


async def test_a_trip_closed_past_its_pivot_is_redriven_from_its_tickets_and_charged_once(
    trip: TripStack,  # noqa: F811
) -> None:
    task_id = fresh_id("tt-redrive")
    await closed_past_the_pivot(trip, task_id)
    before = await shown(trip, task_id)
    assert before["task"]["state"] == "Error"
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]

    # A dry run says what would be kept and starts nothing.
    dry = await trip.sas("redrive", task_id, "--from", "tickets", "--reason", "airline back", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would redrive from tickets: kept flight, hotel, charge; tickets run again" in " ".join(dry.stdout.split())
    # From the flight, the charge (the pivot, done) would run again: refused without --force.
    refused = await trip.sas("redrive", task_id, "--from", "flight", "--reason", "airline back")
    assert refused.returncode != 0 and "the pivot charge is done" in " ".join(refused.stderr.split()), refused.stderr
    described = await trip.client.get_workflow_handle(task_id).describe()
    assert described.status is not None and described.status.name == "TERMINATED"  # nothing started
    assert await shown(trip, task_id) == before

    async with httpx.AsyncClient() as http:
        (await http.delete(f"{trip.services_url}/admin/faults", params={"trip": task_id})).raise_for_status()
    why = "the airline is back; the tickets were never issued"
    done = await trip.sas("redrive", task_id, "--from", "tickets", "--reason", why, "--by", "alice")
    assert done.returncode == 0, done.stderr
    assert "redriven from tickets as incarnation 2" in " ".join(done.stdout.split())

    handle = trip.client.get_workflow_handle(task_id)
    result = await handle.result()
    assert result["state"] == "Processed"
    # Booked and charged once, in the first incarnation; the tickets issued once, in the second.
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book", "tickets.issue"]
    # The new run called the tickets' Agent only: the kept steps were not asked again.
    history = await handle.fetch_history()
    called = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert called == ["tickets.issue"], called
    if os.environ.get("SAS_RECORD_HISTORIES") == "1":  # kept in tests/histories/, replayed by tests/replay
        histories = Path(__file__).resolve().parents[1] / "histories"
        (histories / "ticketed_trip_redriven.json").write_text(
            json.dumps(json.loads(history.to_json()), indent=1) + "\n"
        )
    status = await handle.query("status", result_type=TaskStatus)
    kept = {s.name: (s.state, s.note) for s in status.steps if s.name != "tickets"}
    assert kept == dict.fromkeys(("flight", "hotel", "charge"), (StepState.PROCESSED, "kept by a redrive"))
    charge = next(s for s in status.steps if s.name == "charge")
    assert charge.result is not None and charge.result == next(
        s["result"] for s in before["steps"] if s["name"] == "charge"
    )  # the result the first incarnation's charge answered

    after = await shown(trip, task_id)
    assert after["task"]["state"] == "Processed" and after["task"]["incarnation"] == 2
    [action] = [a for a in after["operator_actions"] if a["action"] == "redrive"]
    assert action["actor"] == "alice" and action["reason"] == why
    assert "redriven from tickets: flight, hotel, charge kept as done" in action["changed"]
    # The Temporal UI's list says which incarnation this is and how it came.
    summary = await (await handle.describe()).static_summary()
    assert summary is not None and "incarnation 2 · redriven from tickets" in summary
