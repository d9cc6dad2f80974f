"""Task types with a fan-out, for the fan-out's tests (tests/fanout/) and its bench
(bench/fan_out.py): a payroll run pays each recipient of its input (one call per item, under the
item's own key), tolerates up to three refused payments, then reports; a payroll batch pays them
all, many at once; a payment is the one-step task the batch is measured against; a wide payroll
runs two small batches at once with a short complete-by, so that its tolerance is passed while
another batch's calls are still at the service. Their service is bench/_payroll_service.py."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        ForEach,
        Forward,
        Input,
        Service,
        StepDefinition,
        StepPolicyValues,
        StepResultModel,
        TaskDefinition,
        TaskId,
        TaskInput,
        Tolerance,
        task_workflow,
    )


class Recipient(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    cents: int


class PayrollInput(TaskInput):
    recipients: list[Recipient]


class Paid(StepResultModel):
    payment_id: str


class Refunded(StepResultModel):
    refunded: bool


class Reported(StepResultModel):
    report_id: str


PAYROLL = Service("payroll")
# Quick retries kept short: a refusal is for good at once, a fault retried twice.
QUICK = StepPolicyValues(complete_by_s=10, max_attempts=3, initial_interval_s=0.2, max_interval_s=1)
PAY = ForEach(
    "pay",
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    forward=PAYROLL.post("/payroll/pay", body={"to": Input("id"), "cents": Input("cents")}, result=Paid),
    undo=PAYROLL.post("/payroll/refund", body={"payment_id": Forward("payment_id")}, result=Refunded, action="refund"),
    policy=QUICK,
    max_concurrency=8,
    tolerate=Tolerance(count=3),
    batch_size=10,
)
REPORT = StepDefinition(
    "report",
    forward=PAYROLL.post("/payroll/report", body={"run": TaskId()}, result=Reported, action="report"),
    read_only=True,
)
PAYROLL_RUN = TaskDefinition("payroll_run", PayrollInput, (PAY, REPORT))
PayrollRunWorkflow = task_workflow(PAYROLL_RUN)

# Batches of 4, two at once; one refusal tolerated; a call held at the service is given up on
# after two attempts of 4 s (tests/fanout/test_fan_out_in_flight.py).
PAY_WIDE = ForEach(
    "pay",
    PAY.forward,
    PAY.undo,
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    policy=StepPolicyValues(complete_by_s=4, max_attempts=2, initial_interval_s=0.2, max_interval_s=1),
    max_concurrency=8,
    tolerate=Tolerance(count=1),
    batch_size=4,
)
PayrollWideWorkflow = task_workflow(TaskDefinition("payroll_wide", PayrollInput, (PAY_WIDE, REPORT)))

# The bench's pair: one task of many items, against as many tasks of one step each.
PAY_ALL = ForEach(
    "pay",
    PAY.forward,
    PAY.undo,
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    max_concurrency=50,
    batch_size=200,
)
PayrollBatchWorkflow = task_workflow(TaskDefinition("payroll_batch", PayrollInput, (PAY_ALL,)))

# The bench's pair with refusals: the same many-at-once fan-out in smaller batches, 2 % of its
# items allowed to fail (1,000 items: 20 batches, 20 refusals tolerated; the tests' 150: 3 batches,
# 3 tolerated), so that refusals inside and past the tolerance are run at size
# (tests/fanout/test_fan_out_at_size.py, ``bench/fan_out.py --refused``).
PAY_MOST = ForEach(
    "pay",
    PAY.forward,
    PAY.undo,
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    policy=QUICK,
    max_concurrency=25,
    tolerate=Tolerance(percent=2),
    batch_size=50,
)
PayrollTolerantWorkflow = task_workflow(TaskDefinition("payroll_tolerant", PayrollInput, (PAY_MOST,)))


class PaymentInput(TaskInput):
    id: str
    cents: int


PAY_ONE = StepDefinition("pay", PAY.forward, PAY.undo)
PaymentWorkflow = task_workflow(TaskDefinition("one_payment", PaymentInput, (PAY_ONE,)), "PaymentWorkflow")

# One batch of 8 items, two at a time, whose held calls are waited for as long as a test needs:
# the batch told to start no more items while its first two are held (tests/fanout/test_fan_out_stop_starting.py).
PAY_NARROW = ForEach(
    "pay",
    PAY.forward,
    PAY.undo,
    items=lambda ctx: ctx.input["recipients"],
    key=lambda item: item["id"],
    policy=StepPolicyValues(complete_by_s=120, max_attempts=1),
    max_concurrency=2,
    tolerate=Tolerance(count=1),
    batch_size=8,
)
PayrollNarrowWorkflow = task_workflow(TaskDefinition("payroll_narrow", PayrollInput, (PAY_NARROW, REPORT)))
