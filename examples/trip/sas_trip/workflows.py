"""The trip task type: ``(flight ‖ hotel) → charge``. The module its entry point names.

The flight and the hotel are calls declared as data: sas's generic HTTP Agent runs them. The
charge has hand-written Agents, one function each (``sas_trip/agents.py``): its amount is the sum
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
        StepDefinition,
        TaskDefinition,
        TaskId,
        task_workflow,
    )
    from sas_trip.agents import charge, refund
    from sas_trip.models import Cancelled, FlightBooked, HotelBooked, TripInput

FLIGHTS = Service("flights")
HOTELS = Service("hotels")

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


CHARGE = StepDefinition("charge", forward=charge, undo=refund)

TRIP = TaskDefinition("trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE))
TripWorkflow = task_workflow(TRIP)
