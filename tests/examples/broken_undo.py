"""A deliberately broken Scheduler for the failure matrix's own tests: the trip, whose undo
engine forgets the attempts it cut off. When a sibling's refusal undoes the task, a step
whose call was cancelled in flight is left as it is - neither undone nor asked about - as if
a cancelled attempt could not have had an effect."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import StepState, TaskResult
    from sas.workflows.scheduler import TaskScheduler
    from sas.workflows.shell.undo import Undo
    from sas_trip.workflows import TRIP


class _ForgetfulUndo(Undo):
    async def step(self, name: str) -> bool:
        if self.run.core.step(name).state == StepState.PROCESSING:  # cut off by the cancel
            return False
        return await super().step(name)


@workflow.defn(name="ForgetsCutOffAttemptsTripWorkflow")
class ForgetsCutOffAttemptsTripWorkflow(TaskScheduler):
    definition = TRIP

    def __init__(self) -> None:
        super().__init__()
        self.undo = _ForgetfulUndo(self.task, self.decisions)

    @workflow.run
    async def run(self, raw: RawValue) -> TaskResult:
        return await self.execute(raw)
