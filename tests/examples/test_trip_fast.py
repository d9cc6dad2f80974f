"""The trip's branches in Temporal's time-skipping environment, with fake Agents - through
sas.api's test helpers, as a team would test its own task type."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
from sas_trip.models import TripInput
from sas_trip.workflows import TripWorkflow

TRIP = TripInput(traveller="Ada", origin="LHR", destination="Lisbon", date="2027-05-01", nights=3)
BOOKED = {
    "flights.book": {"booking_id": "fl_1", "fare_cents": 12_000},
    "hotels.book": {"booking_id": "ht_1", "total_cents": 27_000},
    "cards.charge": {"charge_id": "ch_1", "amount_cents": 39_000},
}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def test_a_trip_books_both_then_charges_and_sends_the_declared_bodies(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=dict(BOOKED))
    result = await run_task(env, TripWorkflow, TRIP, agents, task_id="trip-fast-1")
    assert result.state == TaskState.PROCESSED
    assert sorted(agents.done()[:2]) == ["flights.book", "hotels.book"] and agents.done()[2] == "cards.charge"
    bodies = dict(agents.bodies)
    assert bodies["flights.book"] == {
        "trip": "trip-fast-1",
        "traveller": "Ada",
        "origin": "LHR",
        "destination": "Lisbon",
        "date": "2027-05-01",
    }
    assert bodies["hotels.book"] == {"trip": "trip-fast-1", "guest": "Ada", "city": "Lisbon", "nights": 3}
    charge = next(call for name, call in agents.calls if name == "cards.charge")
    assert charge.results["flight"]["fare_cents"] + charge.results["hotel"]["total_cents"] == 39_000


async def test_a_refused_hotel_undoes_the_flight_naming_its_booking(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=dict(BOOKED), refuse={"hotels.book"})
    result = await run_task(env, TripWorkflow, TRIP, agents, task_id="trip-fast-2")
    assert result.state == TaskState.COMPENSATED
    assert "flights.cancel" in agents.undone() and "cards.charge" not in agents.done()
    cancel = dict(agents.bodies)["flights.cancel"]
    assert cancel == {"booking_id": "fl_1", "book_key": "trip-fast-2:flight"}
    states = {s.name: s.state for s in result.steps}
    assert states == {"flight": "Compensated", "hotel": "Compensated", "charge": "Skipped"}


async def test_a_flaky_charge_is_retried_under_one_key(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=dict(BOOKED), flaky={"cards.charge"})
    result = await run_task(env, TripWorkflow, TRIP, agents, task_id="trip-fast-3")
    assert result.state == TaskState.PROCESSED
    keys = [call.idempotency_key for name, call in agents.calls if name == "cards.charge"]
    assert keys == ["trip-fast-3:charge", "trip-fast-3:charge"] and agents.done().count("cards.charge") == 1
