"""The chaos run's second task type, ``chaos_trip``: every kind of stage the orders lack, over
services of its own (bench/_chaos_trip_services.py), declared on ``sas.api`` alone as a team's
type would be. The chaos run's processes find it through ``SAS_TASK_TYPES__MODULES``.

    (flight ‖ hotel) → approval (a wait for the ``approve`` signal) → settle (a 1 s timer)
                     → charge → insure (only when the input asks for it: a ``When``)

- **flight** and **hotel** are a parallel group; a trip to ``Atlantis`` is refused by both at
  once, one to ``Nowhere`` by the hotel alone (bench/_chaos_trip_services.py).
- **approval** waits for an approval; the chaos driver approves, rejects or stays silent
  (bench/_chaos_trips.py), and silence is a rejection once the deadline passes.
- **charge** is the sum of what the flight and the hotel cost, and **insure** covers the trip.

Every call is an ``HttpCall`` run by sas's generic HTTP Agent; every undo names the service's id
of the effect (``Forward``), looked up by the forward key when the forward answer never arrived.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        Forward,
        ForwardKey,
        HttpCall,
        Input,
        Parallel,
        ProviderId,
        Result,
        Service,
        StepDefinition,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        Wait,
        When,
        task_workflow,
    )

TASK_TYPE = "chaos_trip"
APPROVAL_DEADLINE = timedelta(seconds=20)
"""Long enough for the driver to answer through a worker kill or a Temporal restart, short
enough that a silent trip settles within the run."""

AIR = Service("chaos_air")
LODGING = Service("chaos_hotel")
BANK = Service("chaos_bank")
INSURER = Service("chaos_insurer")


class ChaosTripInput(TaskInput):
    traveller: str = Field(min_length=1, max_length=100)
    destination: str = Field(min_length=1, max_length=60)
    nights: int = Field(ge=1, le=30, strict=True)
    insure: bool = False


class Booked(StepResultModel):
    booking_id: ProviderId
    cost_cents: int


class Charged(StepResultModel):
    charge_id: ProviderId
    amount_cents: int


class Covered(StepResultModel):
    policy_id: ProviderId


class Undone(StepResultModel):
    undone: bool


def _undo(service: Service, path: str, id_field: str) -> HttpCall:
    return service.post(
        path, body={"trip": TaskId(), id_field: Forward(id_field), "forward_key": ForwardKey()}, result=Undone
    )


FLIGHT = StepDefinition(
    "flight",
    forward=AIR.post(
        "/chaos_air/book",
        body={"trip": TaskId(), "traveller": Input("traveller"), "destination": Input("destination")},
        result=Booked,
    ),
    undo=_undo(AIR, "/chaos_air/cancel", "booking_id"),
)
HOTEL = StepDefinition(
    "hotel",
    forward=LODGING.post(
        "/chaos_hotel/book",
        body={"trip": TaskId(), "destination": Input("destination"), "nights": Input("nights")},
        result=Booked,
    ),
    undo=_undo(LODGING, "/chaos_hotel/cancel", "booking_id"),
)
CHARGE = StepDefinition(
    "charge",
    forward=BANK.post(
        "/chaos_bank/charge",
        body={
            "trip": TaskId(),
            "flight_cents": Result("flight", "cost_cents"),
            "hotel_cents": Result("hotel", "cost_cents"),
        },
        result=Charged,
    ),
    undo=_undo(BANK, "/chaos_bank/refund", "charge_id"),
)
INSURE = StepDefinition(
    "insure",
    forward=INSURER.post(
        "/chaos_insurer/cover", body={"trip": TaskId(), "charge_id": Result("charge", "charge_id")}, result=Covered
    ),
    undo=_undo(INSURER, "/chaos_insurer/uncover", "policy_id"),
    when=When(lambda ctx: bool(ctx.input.get("insure")), "no insurance asked for"),
)

CHAOS_TRIP = TaskDefinition(
    TASK_TYPE,
    ChaosTripInput,
    (
        Parallel(FLIGHT, HOTEL),
        Wait("approval", signal="approve", deadline=APPROVAL_DEADLINE, on_deadline="compensate"),
        Wait("settle", delay=timedelta(seconds=1)),
        CHARGE,
        INSURE,
    ),
)
ChaosTripWorkflow = task_workflow(CHAOS_TRIP)
