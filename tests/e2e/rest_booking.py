"""A team's task type over a REST service, every call declared as data: a path parameter from the
input, a declared header and query parameter, a result picked out of a nested answer, and an undo
that deletes by the id in its path (registered by tests/e2e/test_rest_calls.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        Const,
        Forward,
        HttpCall,
        Input,
        Service,
        StepDefinition,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        task_workflow,
    )


class StayInput(TaskInput):
    hotel: str
    nights: int
    currency: str = "EUR"


class Booked(StepResultModel):
    booking_id: str
    total_cents: int


class Deleted(StepResultModel):
    deleted: bool


ROOMS = Service("rooms")
BOOK = StepDefinition(
    "book",
    forward=HttpCall(
        ROOMS,
        "PUT",
        "/hotels/{hotel}/bookings",
        params={"hotel": Input("hotel")},
        query={"currency": Input("currency")},
        headers={"X-Tenant": Const("acme"), "X-Stay": TaskId()},
        body={"nights": Input("nights")},
        pick={"booking_id": "data.booking.id", "total_cents": "data.booking.price.cents"},
        result=Booked,
        action="book",
    ),
    undo=HttpCall(
        ROOMS,
        "DELETE",
        "/bookings/{booking_id}",
        params={"booking_id": Forward("booking_id")},
        result=Deleted,
        action="unbook",
    ),
)
# A refusal after the booking: a room with no view cannot be had.
VIEW = StepDefinition(
    "view",
    forward=HttpCall(ROOMS, "GET", "/views/{hotel}", params={"hotel": Input("hotel")}, result=Deleted, action="view"),
    read_only=True,
)
StayWorkflow = task_workflow(TaskDefinition("stay", StayInput, (BOOK, VIEW)), "StayWorkflow")
