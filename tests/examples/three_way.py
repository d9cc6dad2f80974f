"""A task type with a parallel group of three, for the failure matrix's own tests: an outing's
ticket, table and taxi are booked side by side, each through a service declared as data. And
the same type on a deliberately broken Scheduler."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

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
    from sas.task_models import TaskResult
    from sas.workflows.scheduler import TaskScheduler
    from sas.workflows.shell.undo import Undo


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


class _CutOffLastUndo(Undo):
    def order(self) -> list[str]:
        completed = [n for n in super().order() if n in self.run.core.completed]
        return completed + [n for n in super().order() if n not in completed]


@workflow.defn(name="UndoesCutOffLastOutingWorkflow")
class UndoesCutOffLastOutingWorkflow(TaskScheduler):
    """Deliberately broken: its undo engine undoes the completed steps before the attempts that
    never completed, though an attempt cut off in flight is the latest work."""

    definition = OUTING

    def __init__(self) -> None:
        super().__init__()
        self.undo = _CutOffLastUndo(self.task, self.decisions)

    @workflow.run
    async def run(self, raw: RawValue) -> TaskResult:
        return await self.execute(raw)
