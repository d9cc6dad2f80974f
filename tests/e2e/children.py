"""A task type with a child step, over the real remote services, for the end-to-end tests of
child tasks (tests/supervisor/test_child_tasks.py): a gift order reserves stock of its own,
runs a whole order as its child (reserve, charge, ship), then ships the gift wrapping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult
    from sas.workflows.definitions import ChildTask, StepContext, TaskDefinition
    from sas.workflows.scheduler import TaskScheduler
    from sas_orders.models import OrderInput
    from sas_orders.steps import RESERVE, SHIP


def the_same_order(ctx: StepContext) -> Mapping[str, Any]:
    """The child order's input: the parent's own (the child's ledger is under its own task id)."""
    return dict(ctx.input)


GIFT = TaskDefinition(
    "gift_order", OrderInput, (RESERVE, ChildTask("gift", task_type="order", input=the_same_order), SHIP)
)


@workflow.defn(name="GiftOrderWorkflow")
class GiftOrderWorkflow(TaskScheduler):
    definition = GIFT

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)
