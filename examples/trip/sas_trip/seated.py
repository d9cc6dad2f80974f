"""The seated trip: ``([flight → seat] ‖ hotel) → charge``. The module its entry point names,
beside the ``trip`` type's own (``sas_trip/workflows.py``), which it leaves as it was.

The flight's branch is a ``Sequence``: the seat is reserved on the flight once the flight is
booked (it needs the booking), while the hotel is booked beside them. When the seat is refused
for good, the trip is undone as a whole: the hotel, booked or still being booked, is cancelled,
and the flight is cancelled after its seat (latest first within the branch); the seat that was
refused is never released (its lookup says nothing was done).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        Forward,
        ForwardKey,
        Input,
        Parallel,
        Result,
        Sequence,
        Service,
        StepDefinition,
        TaskDefinition,
        TaskId,
        task_workflow,
    )
    from sas_trip.models import Cancelled, SeatedTripInput, SeatReserved
    from sas_trip.workflows import CHARGE, FLIGHT, HOTEL

SEATS = Service("seats")

SEAT = StepDefinition(
    "seat",
    forward=SEATS.post(
        "/seats/reserve",
        body={"trip": TaskId(), "flight": Result("flight", "booking_id"), "seat": Input("seat")},
        result=SeatReserved,
    ),
    undo=SEATS.post(
        "/seats/release", body={"booking_id": Forward("booking_id"), "book_key": ForwardKey()}, result=Cancelled
    ),
)

SEATED_TRIP = TaskDefinition("seated_trip", SeatedTripInput, (Parallel(Sequence(FLIGHT, SEAT), HOTEL), CHARGE))
SeatedTripWorkflow = task_workflow(SEATED_TRIP)
