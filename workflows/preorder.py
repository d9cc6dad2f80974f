"""PreorderWorkflow: a second task type in five lines - reserve -> charge, shipped later."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from task_models import TaskResult
    from workflows.definitions import PREORDER
    from workflows.scheduler import TaskScheduler


@workflow.defn(name="PreorderWorkflow")
class PreorderWorkflow(TaskScheduler):
    definition = PREORDER

    @workflow.run
    async def run(self, preorder: Any) -> TaskResult:
        return await self.execute(preorder)
