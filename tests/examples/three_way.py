"""A task type with a parallel group of three, for the failure matrix's own tests: an outing's
ticket, table and taxi are booked side by side, each through a service declared as data."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        ForwardKey,
        Input,
        Parallel,
        Service,
        StepDefinition,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        task_workflow,
    )


class OutingInput(TaskInput):
    who: str


class Booked(StepResultModel):
    booking_id: str | None = None


def _booked(service: str) -> StepDefinition:
    calls = Service(service)
    return StepDefinition(
        service,
        forward=calls.post(f"/{service}/book", body={"outing": TaskId(), "who": Input("who")}, result=Booked),
        undo=calls.post(f"/{service}/cancel", body={"book_key": ForwardKey()}, result=Booked),
    )


OUTING = TaskDefinition("outing", OutingInput, (Parallel(_booked("ticket"), _booked("table"), _booked("taxi")),))
OutingWorkflow = task_workflow(OUTING)
