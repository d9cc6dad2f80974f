"""PreorderWorkflow: a second task type in five lines - reserve -> charge, shipped later."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import PreorderInput, TaskResult
    from sas.workflows.definitions import CHARGE, RESERVE, TaskDefinition
    from sas.workflows.scheduler import TaskScheduler

PREORDER = TaskDefinition("preorder", PreorderInput, (RESERVE, CHARGE))


@workflow.defn(name="PreorderWorkflow")
class PreorderWorkflow(TaskScheduler):
    definition = PREORDER

    @workflow.run
    async def run(self, preorder: RawValue) -> TaskResult:
        return await self.execute(preorder)
