"""The ticketed trip: ``(flight ‖ hotel) → charge (pivot) → tickets``. The module its entry point
names, beside the ``trip`` type's own (``sas_trip/workflows.py``), which it leaves as it was.

The charge is the point of no return: once the card may have been charged, the trip is no
longer undone - the airline issues the tickets, however long that takes. A failure before the
charge, or the charge refused for good (a declined card: nothing was charged), undoes the
bookings as in the ``trip``; a failure of the tickets is retried, then parked for an operator,
and nothing is undone. Undoing it anyway is an operator's decision:
``sas compensate ID --force --reason WHY``, audited, which refunds the charge and cancels the
bookings; the tickets have no undo (they are forward only), so they stay issued.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import Input, Parallel, Result, Service, StepDefinition, TaskDefinition, TaskId, task_workflow
    from sas_trip.models import TicketsIssued, TripInput
    from sas_trip.workflows import CHARGE, FLIGHT, HOTEL

# No undo of the tickets, so no lookup for one either.
TICKETS = Service("tickets", lookup=None)

ISSUE = StepDefinition(
    "tickets",
    forward=TICKETS.post(
        "/tickets/issue",
        body={"trip": TaskId(), "traveller": Input("traveller"), "flight": Result("flight", "booking_id")},
        result=TicketsIssued,
    ),
)

TICKETED_TRIP = TaskDefinition("ticketed_trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE, ISSUE), pivot=CHARGE.name)
TicketedTripWorkflow = task_workflow(TICKETED_TRIP)
