"""The kit against the trip example's services (``sas_trip.services``, in their own process):
the flights and hotels calls derived from the trip task type's declarations (calls declared as
data), the cards calls said outright (a hand-written Agent). Their fault API holds a forward
for the in-flight race; their lookup waits for it."""

from __future__ import annotations

import httpx
import pytest

from sas.api.contract import ExplicitCalls, ServiceCheckError, SlowCall, Verdict, assert_conforms, check_service

TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 3}
CARDS = ExplicitCalls(
    forward="/cards/charge",
    body={"trip": "{task_id}", "card": "4242424242424242", "currency": "EUR", "amount_cents": 100},
    undo="/cards/refund",
    undo_body={"charge_id": "{forward.charge_id}"},
)


async def slow_trip_call(call: SlowCall) -> None:
    """The trip services' fault API: a latency for the calls whose key starts with the task id."""
    rule = {"endpoint": call.call, "kind": "latency", "latency_ms": int(call.seconds * 1000), "trip": call.task_id}
    async with httpx.AsyncClient() as http:
        (await http.post(f"{call.url}/admin/faults", json=rule)).raise_for_status()


@pytest.mark.parametrize(
    ("name", "refusing"), [("flights", {"destination": "Atlantis"}), ("hotels", {"destination": "Nowhere"})]
)
async def test_the_calls_declared_as_data_are_derived_and_meet_the_contract(
    trip_services: str, name: str, refusing: dict[str, str]
) -> None:
    report = await check_service(name, trip_services, sample_input=TRIP, refusing=refusing, slow_forward=slow_trip_call)
    assert report.calls == [f"{name}.book: POST /{name}/book, undo /{name}/cancel, lookup /{name}/lookup"]
    assert_conforms(report)
    assert {r.verdict for r in report.results} == {Verdict.PASS}, report.lines()
    race = next(r for r in report.results if r.clause.value == "in-flight")
    assert race.detail.startswith("waited for the forward and named its effect")


async def test_the_hand_written_cards_agent_is_checked_from_its_paths(trip_services: str) -> None:
    report = await check_service(
        "cards", trip_services, calls=CARDS, refusing={"card": "4000000000000002"}, slow_forward=slow_trip_call
    )
    assert_conforms(report)
    assert {r.verdict for r in report.results} == {Verdict.PASS}, report.lines()


async def test_a_hand_written_agent_s_service_asks_for_its_paths(trip_services: str) -> None:
    with pytest.raises(ServiceCheckError, match=r"hand-written Agents only .*--forward PATH"):
        await check_service("cards", trip_services)


async def test_a_body_that_takes_the_input_asks_for_a_sample(trip_services: str) -> None:
    with pytest.raises(ServiceCheckError, match="traveller, origin, destination, date from the task input"):
        await check_service("flights", trip_services)
    with pytest.raises(ServiceCheckError, match=r"not a valid \w*TripInput: nights"):
        await check_service("flights", trip_services, sample_input={**TRIP, "nights": 0})
