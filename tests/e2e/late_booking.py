"""A task type whose first step books at a desk service that the test runs itself (registered by
tests/e2e/test_cancelled_attempt_waited.py): book, then a read-only confirm that never matters."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        Forward,
        ForwardKey,
        Service,
        StepDefinition,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        task_workflow,
    )


class DeskInput(TaskInput):
    guest: str


class Booked(StepResultModel):
    booking_id: str


class Done(StepResultModel):
    ok: bool


DESK = Service("desk")  # its lookup: GET /desk/lookup?idempotency_key=...
BOOK = StepDefinition(
    "book",
    forward=DESK.post("/desk/book", body={"booking": TaskId()}, result=Booked),
    undo=DESK.post("/desk/cancel", body={"booking_id": Forward("booking_id"), "key": ForwardKey()}, result=Done),
)
CONFIRM = StepDefinition("confirm", forward=DESK.post("/desk/confirm", body={}, result=Done), read_only=True)
DeskWorkflow = task_workflow(TaskDefinition("desk_booking", DeskInput, (BOOK, CONFIRM)), "DeskWorkflow")
