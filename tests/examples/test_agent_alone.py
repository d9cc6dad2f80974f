"""One Agent tested alone with sas.api.testing.run_agent, against its team's service on loopback: the trip's
hand-written charge and refund (one function each), and a call declared as data; and a task type
run with its hand-written Agents for real against that service beside fakes of the others."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from sas.api import TaskState
from sas.api.testing import FakeAgents, run_agent, run_task, time_skipping_environment
from sas_trip.agents import charge, refund
from sas_trip.workflows import FLIGHT, TripWorkflow
from tests.helpers import fresh_id

BOOKED = {"flight": {"fare_cents": 12_000}, "hotel": {"total_cents": 27_000}}
CARD = {"card": "4242424242424242", "currency": "EUR"}


async def ledger(url: str, trip: str) -> list[str]:
    async with httpx.AsyncClient() as http:
        entries = (await http.get(f"{url}/ledger", params={"trip": trip})).json()["entries"]
    return [e["action"] for e in entries]


async def test_the_charge_sends_the_sum_of_the_bookings_under_the_steps_key(trip_services: str) -> None:
    trip = fresh_id("alone")
    result = await run_agent(charge, trip_services, task_id=trip, payload=CARD, results=BOOKED)
    assert result.data["amount_cents"] == 39_000 and result.data["charge_id"]
    again = await run_agent(charge, trip_services, task_id=trip, payload=CARD, results=BOOKED, attempt=2)
    assert again.data["charge_id"] == result.data["charge_id"]  # a retry under the key: one charge
    assert await ledger(trip_services, trip) == ["cards.charge"]

    refunded = await run_agent(refund, trip_services, task_id=trip, undo_of="charge")  # found by the lookup
    assert refunded.data == {"refunded": True}
    assert await ledger(trip_services, trip) == ["cards.charge", "cards.refund"]


async def test_a_refund_of_a_charge_never_made_is_not_sent(trip_services: str) -> None:
    trip = fresh_id("alone-nothing")
    result = await run_agent(refund, trip_services, task_id=trip, undo_of="charge")
    assert result.data == {}  # nothing to undo: the lookup said the card was never charged
    assert await ledger(trip_services, trip) == []


async def test_a_declined_card_is_a_refusal_for_good(trip_services: str) -> None:
    declined = {**CARD, "card": "4000000000000002"}
    with pytest.raises(ApplicationError) as refused:
        await run_agent(charge, trip_services, task_id=fresh_id("alone-declined"), payload=declined, results=BOOKED)
    assert refused.value.non_retryable and "card_declined" in str(refused.value)


async def test_a_call_declared_as_data_runs_alone_too(trip_services: str) -> None:
    trip = fresh_id("alone-flight")
    payload = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01"}
    result = await run_agent(FLIGHT.forward, trip_services, task_id=trip, step="flight", payload=payload)
    assert result.data["fare_cents"] == 12_000
    assert await ledger(trip_services, trip) == ["flights.book"]


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


FAKE_BOOKINGS = {
    "flights.book": {"booking_id": "fl_1", "fare_cents": 12_000},
    "hotels.book": {"booking_id": "ht_1", "total_cents": 27_000},
}
TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 3}


async def test_a_type_runs_its_hand_written_agents_for_real_beside_the_fakes(
    env: WorkflowEnvironment, trip_services: str
) -> None:
    """The charge's Agents run as on a worker against the team's own service; the bookings are faked."""
    agents = FakeAgents(answers=dict(FAKE_BOOKINGS), services={"cards": trip_services})
    trip = fresh_id("mixed")
    result = await run_task(env, TripWorkflow, TRIP, agents, task_id=trip)
    assert result.state == TaskState.PROCESSED
    charged = next(s for s in result.steps if s.name == "charge").result
    assert charged is not None and charged["amount_cents"] == 39_000
    assert await ledger(trip_services, trip) == ["cards.charge"]
    assert sorted(agents.done()) == ["flights.book", "hotels.book"]  # the fakes' own


async def test_a_real_refusal_undoes_the_faked_steps_and_sends_no_refund(
    env: WorkflowEnvironment, trip_services: str
) -> None:
    agents = FakeAgents(answers=dict(FAKE_BOOKINGS), services={"cards": trip_services})
    trip = fresh_id("mixed-declined")
    result = await run_task(env, TripWorkflow, {**TRIP, "card": "4000000000000002"}, agents, task_id=trip)
    assert result.state == TaskState.COMPENSATED
    assert sorted(agents.undone()) == ["flights.cancel", "hotels.cancel"]
    assert await ledger(trip_services, trip) == []  # declined, so nothing to refund: the lookup said so
