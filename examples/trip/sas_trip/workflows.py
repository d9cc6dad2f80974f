"""The trip task type: ``(flight ‖ hotel) → charge``. The module its entry point names.

The flight and the hotel are calls declared as data: no Agent class, sas's generic HTTP Agent
runs them. The charge has a hand-written Agent (``sas_trip/agents.py``): its amount is the sum
of what the flight and the hotel cost, which only code can work out.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        Forward,
        ForwardKey,
        Input,
        Parallel,
        Service,
        StepCall,
        StepDefinition,
        StepResult,
        TaskDefinition,
        TaskId,
        task_workflow,
    )
    from sas_trip.models import Cancelled, Charged, FlightBooked, HotelBooked, Refunded, TripInput

FLIGHTS = Service("flights")
HOTELS = Service("hotels")
CARDS = Service("cards", agent="sas_trip.agents:CardsAgent")

FLIGHT = StepDefinition(
    "flight",
    forward=FLIGHTS.post(
        "/flights/book",
        body={
            "trip": TaskId(),
            "traveller": Input("traveller"),
            "origin": Input("origin"),
            "destination": Input("destination"),
            "date": Input("date"),
        },
        result=FlightBooked,
    ),
    undo=FLIGHTS.post(
        "/flights/cancel", body={"booking_id": Forward("booking_id"), "book_key": ForwardKey()}, result=Cancelled
    ),
)
HOTEL = StepDefinition(
    "hotel",
    forward=HOTELS.post(
        "/hotels/book",
        body={"trip": TaskId(), "guest": Input("traveller"), "city": Input("destination"), "nights": Input("nights")},
        result=HotelBooked,
    ),
    undo=HOTELS.post(
        "/hotels/cancel", body={"booking_id": Forward("booking_id"), "book_key": ForwardKey()}, result=Cancelled
    ),
)


class CardsDefs:
    """The charge's Agents, implemented by ``sas_trip.agents.CardsAgent``."""

    @CARDS.agent_defn("charge", Charged)
    async def charge(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @CARDS.agent_defn("refund", Refunded)
    async def refund(self, call: StepCall) -> StepResult:
        raise NotImplementedError


CHARGE = StepDefinition("charge", forward=CardsDefs.charge, undo=CardsDefs.refund)

TRIP = TaskDefinition("trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE))
TripWorkflow = task_workflow(TRIP)
