"""Team north's package, as a team would write it: its own ``flights`` service and its own
``booking`` task type, named under the team (``north.flights``, ``north.booking``), so
that another team's of the same names stand beside them on one stack. Registered by
tests/e2e/test_two_teams.py through SAS_TASK_TYPES__MODULES, with the other team's."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import Forward, ForwardKey, Input, Service, StepDefinition, TaskDefinition, TaskId, task_workflow
    from sas_trip.models import Cancelled, FlightBooked, TripInput

FLIGHTS = Service("flights", team="north")

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

BOOKING = TaskDefinition("booking", TripInput, (FLIGHT,), team="north")
BookingWorkflow = task_workflow(BOOKING)
