"""OrderWorkflow: reserve -> charge -> ship, undone in reverse if it cannot complete."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OrderInput, TaskResult
    from sas.workflows.definitions import CHARGE, RESERVE, SHIP, TaskDefinition
    from sas.workflows.scheduler import TaskScheduler

ORDER = TaskDefinition("order", OrderInput, (RESERVE, CHARGE, SHIP))


@workflow.defn(name="OrderWorkflow")
class OrderWorkflow(TaskScheduler):
    definition = ORDER

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        # The raw payload, not OrderInput: input that fails to decode or validate must fail the workflow
        # with a clear, non-retryable error instead of a workflow task retried forever.
        return await self.execute(order)
