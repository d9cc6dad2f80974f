"""The chaos run's fan-out and child-task types, declared on ``sas.api`` alone as a team's types
would be, over services of their own (bench/_chaos_shape_services.py). The chaos run's processes
find them through ``SAS_TASK_TYPES__MODULES``, beside the trip (bench/_chaos_trip.py).

    chaos_payroll:  pay (a ForEach: 3 items at once, batches of 4, 2 may fail) → file
    chaos_parent:   open → child (a ChildTask: chaos_child) → file
    chaos_child:    deliver

- **pay** pays each recipient under the item's own key; a recipient named ``refuse-…`` is
  refused for good, ``slow-…`` is served slowly and ``late-…`` after its caller has given up
  (the retry meets the effect), so kills land while a batch is at the service.
- **file** files the task in a cabinet; the cabinet ``Nowhere`` is refused, which undoes a
  fan-out that completed (every payment still standing is refunded) or a child that completed
  (its parent's clean-up undoes it).
- **deliver** is the child's own call with its undo; a parcel to ``Atlantis`` is refused (the
  child undoes itself, and its parent's step fails for good), one to ``Faraway`` served slowly.

Every undo names the service's id of the effect (``Forward``), looked up by the forward key
(``ForwardKey``) when the forward answer never arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        ChildTask,
        ForEach,
        Forward,
        ForwardKey,
        HttpCall,
        Input,
        ProviderId,
        Service,
        StepContext,
        StepDefinition,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        Tolerance,
        task_workflow,
    )

FAN_OUT_TYPE = "chaos_payroll"
PARENT_TYPE = "chaos_parent"
CHILD_TYPE = "chaos_child"
CHILD_STEP = "child"
TOLERATED = 2

WAGES = Service("chaos_wages")
FILING = Service("chaos_filing")
DESK = Service("chaos_desk")
COURIER = Service("chaos_courier")


class Recipient(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1, max_length=28)
    cents: int = Field(ge=1, strict=True)


class ChaosPayrollInput(TaskInput):
    recipients: list[Recipient] = Field(min_length=1, max_length=50)
    cabinet: str = Field(min_length=1, max_length=60)


class ChaosParentInput(TaskInput):
    parcel: str = Field(min_length=1, max_length=60)
    destination: str = Field(min_length=1, max_length=60)
    cabinet: str = Field(min_length=1, max_length=60)


class ChaosChildInput(TaskInput):
    parcel: str = Field(min_length=1, max_length=60)
    destination: str = Field(min_length=1, max_length=60)


class Paid(StepResultModel):
    payment_id: ProviderId


class Filed(StepResultModel):
    filing_id: ProviderId


class Opened(StepResultModel):
    case_id: ProviderId


class Delivered(StepResultModel):
    delivery_id: ProviderId


class Undone(StepResultModel):
    undone: bool


def _undo(service: Service, path: str, id_field: str) -> HttpCall:
    return service.post(
        path, body={"task": TaskId(), id_field: Forward(id_field), "forward_key": ForwardKey()}, result=Undone
    )


PAY = ForEach(
    "pay",
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    forward=WAGES.post(
        "/chaos_wages/pay", body={"task": TaskId(), "to": Input("id"), "cents": Input("cents")}, result=Paid
    ),
    undo=_undo(WAGES, "/chaos_wages/refund", "payment_id"),
    # Few at once and small batches: a run of 8 items spans two batches and several rounds,
    # so a worker killed meanwhile finds one batch done and another at the service.
    max_concurrency=3,
    batch_size=4,
    tolerate=Tolerance(count=TOLERATED),
)
FILE = StepDefinition(
    "file",
    forward=FILING.post("/chaos_filing/file", body={"task": TaskId(), "cabinet": Input("cabinet")}, result=Filed),
    undo=_undo(FILING, "/chaos_filing/unfile", "filing_id"),
)
CHAOS_PAYROLL = TaskDefinition(FAN_OUT_TYPE, ChaosPayrollInput, (PAY, FILE))
ChaosPayrollWorkflow = task_workflow(CHAOS_PAYROLL)

DELIVER = StepDefinition(
    "deliver",
    forward=COURIER.post(
        "/chaos_courier/deliver",
        body={"task": TaskId(), "parcel": Input("parcel"), "destination": Input("destination")},
        result=Delivered,
    ),
    undo=_undo(COURIER, "/chaos_courier/recall", "delivery_id"),
)
CHAOS_CHILD = TaskDefinition(CHILD_TYPE, ChaosChildInput, (DELIVER,))
ChaosChildWorkflow = task_workflow(CHAOS_CHILD)


def the_parcel(ctx: StepContext) -> Mapping[str, Any]:
    """The child's input: the parent's parcel and where it goes."""
    return {"parcel": ctx.input["parcel"], "destination": ctx.input["destination"]}


OPEN = StepDefinition(
    "open",
    forward=DESK.post("/chaos_desk/open", body={"task": TaskId(), "parcel": Input("parcel")}, result=Opened),
    undo=_undo(DESK, "/chaos_desk/close", "case_id"),
)
CHAOS_PARENT = TaskDefinition(
    PARENT_TYPE, ChaosParentInput, (OPEN, ChildTask(CHILD_STEP, task_type=CHILD_TYPE, input=the_parcel), FILE)
)
ChaosParentWorkflow = task_workflow(CHAOS_PARENT)
