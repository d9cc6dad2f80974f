"""Task types beyond a straight line, over the real remote services, for the end-to-end tests
of parallel groups, approvals and conditions (registered by tests/e2e/test_step_kinds.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult
    from sas.workflows.definitions import Choice, Option, Parallel, TaskDefinition, Wait, When
    from sas.workflows.scheduler import TaskScheduler
    from sas_orders.models import OrderInput
    from sas_orders.steps import CHARGE, RESERVE, SHIP

# The whole order as one parallel group: stock, payment and shipment at once.
KIT = TaskDefinition("kit", OrderInput, (Parallel(RESERVE, CHARGE, SHIP),))
# A person approves the order before anything is done; no answer in 4 s undoes it.
APPROVED = TaskDefinition(
    "approved_order", OrderInput, (Wait("approval", signal="approve", deadline=timedelta(seconds=4)), RESERVE, CHARGE)
)
# The same, with a deadline no test machine's load can reach before `sas approve` answers.
PATIENT = TaskDefinition(
    "patient_order", OrderInput, (Wait("approval", signal="approve", deadline=timedelta(minutes=10)), RESERVE, CHARGE)
)
# Collected in store: nothing to ship.
PICKUP = TaskDefinition(
    "pickup_order",
    OrderInput,
    (RESERVE, CHARGE, replace(SHIP, when=When(lambda ctx: ctx.input["address"] != "pickup", "collected in store"))),
)

# Shipped to the door, or to the store for collection: one path or the other, never both.
CHOSEN = TaskDefinition(
    "chosen_order",
    OrderInput,
    (
        RESERVE,
        CHARGE,
        Choice(
            Option("delivery to the door", when=lambda ctx: ctx.input["address"] != "pickup", then=SHIP),
            otherwise=replace(SHIP, name="ship_to_store"),
        ),
    ),
)


@workflow.defn(name="KitWorkflow")
class KitWorkflow(TaskScheduler):
    definition = KIT

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)


@workflow.defn(name="ApprovedOrderWorkflow")
class ApprovedOrderWorkflow(TaskScheduler):
    definition = APPROVED

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)


@workflow.defn(name="PatientOrderWorkflow")
class PatientOrderWorkflow(TaskScheduler):
    definition = PATIENT

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)


@workflow.defn(name="PickupOrderWorkflow")
class PickupOrderWorkflow(TaskScheduler):
    definition = PICKUP

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)


@workflow.defn(name="ChosenOrderWorkflow")
class ChosenOrderWorkflow(TaskScheduler):
    definition = CHOSEN

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)
