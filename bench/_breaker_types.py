"""A task type for bench/breaker.py that does not use payment: reserve, then ship. Its
throughput is what "the other services" keep doing while payment is down."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult
    from sas.workflows.definitions import TaskDefinition
    from sas.workflows.scheduler import TaskScheduler
    from sas_orders.models import OrderInput
    from sas_orders.steps import RESERVE, SHIP

STOCK = TaskDefinition("stock", OrderInput, (RESERVE, SHIP))


@workflow.defn(name="StockWorkflow")
class StockWorkflow(TaskScheduler):
    definition = STOCK

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)
