"""CleanupWorkflow: undo a task whose Scheduler workflow was closed from outside (terminated,
failed, timed out, cancelled), from what the mirror recorded - with the Scheduler's own undo
engine (``workflows/shell/undo.py``).

The Supervisor starts it (id ``cleanup-<task id>``) when it finds a task the mirror says is
open but whose workflow is dead (detection d). Each undo runs on its step's service queue,
with the same idempotency key as the Scheduler's (``<forward key>:undo``), so an undo the dead
workflow had already begun is not done twice. Steps that may have had an effect are undone,
latest first; steps never started are Skipped. Its mirror writes carry versions above
anything the dead workflow could still write (``CLEANUP_SEQ``).

An undo that fails after its quick retries is CompensationFailed and waits for a decision,
exactly as in the Scheduler: the Supervisor's ladder, or an operator's ``sas retry``,
``sas compensate`` or ``sas park``, which reach this workflow when the task's own has closed.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorRequest, StepPlan, StepState, StepStatus, TaskState, TaskStatus
    from sas.task_models.cleanup import CLEANUP_SEQ, CleanupInput
    from sas.workflows.core.machine import PlanStep, TaskCore
    from sas.workflows.inputs import decode_model
    from sas.workflows.shell.records import Records
    from sas.workflows.shell.undo import UndoEngine

# The states in which a step may have had its effect: undo it (undoing is safe when nothing was done).
UNDO_STATES = ("Processed", "Processing", "Failed", "Compensating", "CompensationFailed", "Error")


@workflow.defn(name="CleanupWorkflow")
class CleanupWorkflow(UndoEngine):
    @workflow.run
    async def run(self, raw: RawValue) -> dict[str, str]:
        cleanup = decode_model(raw, CleanupInput, "clean-up")
        steps = sorted(cleanup.steps, key=lambda s: s.position)
        status = TaskStatus(
            task_id=cleanup.task_id,
            task_type=cleanup.task_type,
            state=TaskState.COMPENSATING,
            steps=[
                StepStatus(
                    name=s.name,
                    position=s.position,
                    state=StepState(s.state),
                    runs=1 if s.state in UNDO_STATES or s.state == StepState.COMPENSATED else 0,
                )
                for s in steps
            ],
        )
        plan = [PlanStep(s.name, s.position, s.position, undo=s.compensation is not None) for s in steps]
        self._core = TaskCore(status, plan, accepted=True)
        # Processed steps completed in the order of their rows' versions: undone latest first.
        self._core.completed = [s.name for s in sorted(steps, key=lambda s: s.version) if s.state == "Processed"]
        # Requests reach it as they would the Scheduler: an operator's compensate retries the undo.
        self._core.compensation = OperatorRequest(by="supervisor", reason=cleanup.reason[:2000])
        self._records = Records(task_id=cleanup.task_id, chain_id=cleanup.chain_id, stamp=CLEANUP_SEQ, clocked=False)
        self._plans = {
            s.name: StepPlan(
                name=s.name,
                position=s.position,
                agent=s.compensation or "",
                compensation=s.compensation,
                idempotency_key=s.idempotency_key,
                task_queue=s.task_queue,
            )
            for s in steps
        }
        self._compensation_policy = cleanup.compensation_policy
        self._payload = cleanup.payload
        await self._run_compensations(audit=False)
        return {s.name: str(s.state) for s in self._core.status.steps}
