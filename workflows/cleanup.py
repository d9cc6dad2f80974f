"""CleanupWorkflow: undo a task whose Scheduler workflow was closed from outside (terminated,
failed, timed out, cancelled), from what the mirror recorded - with the Scheduler's own
collaborators: its run (``TaskRun``), its ``Decisions`` and its undo engine (``Undo``,
``workflows/shell/undo.py``), and the same operator handlers (``shell/operator.py``).

The Supervisor starts it (id ``cleanup-<task id>``) when it finds a task the mirror says is
open but whose workflow is dead (detection d). Each undo runs where its step's would,
with the same idempotency key as the Scheduler's (``<forward key>:undo``), so an undo the dead
workflow had already begun is not done twice. A fan-out step's items, which write no row, are
undone each under its own key (``shell/cleanup_fanout.py``), as ``cleanup.plan`` listed them from
the dead workflow's history; if they could not be listed, the step waits for an operator. Steps that may have had an effect are undone,
latest first; steps never started are Skipped. Its mirror writes carry versions above
anything the dead workflow could still write (``CLEANUP_SEQ``).

It takes only the task's id from its input: before it undoes anything, ``cleanup.plan``
(``activities/cleanup_plans.py``) checks that the Supervisor decided a clean-up of the task and
that Temporal shows the task's workflow closed other than by completing, and reads the steps
from the state store. A clean-up started by hand for a task that completed is refused, with an
alert, and undoes nothing; and the worker runs only undo Agents for it
(``sas/runtime/activity_owners.py``).

An undo that fails after its quick retries is CompensationFailed and waits for a decision,
exactly as in the Scheduler: the Supervisor's ladder, or an operator's ``sas retry``,
``sas compensate`` or ``sas park``, which reach this workflow when the task's own has closed.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorRequest, StepPlan, StepState, StepStatus, TaskState, TaskStatus
    from sas.task_models.activity_defs import CleanupDefs
    from sas.task_models.cleanup import CLEANUP_SEQ, CleanupInput, CleanupRequest
    from sas.workflows.core.children import CHILD_AGENT
    from sas.workflows.core.machine import PlanStep, TaskCore
    from sas.workflows.inputs import decode_model
    from sas.workflows.shell.children import Children
    from sas.workflows.shell.cleanup_fanout import CleanupFanOut
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.operator import OperatorHandlers
    from sas.workflows.shell.records import Records
    from sas.workflows.shell.task_run import TaskRun
    from sas.workflows.shell.undo import Undo

# The states in which a step may have had its effect: undo it (undoing is safe when nothing was done).
UNDO_STATES = (
    StepState.PROCESSED,
    StepState.PROCESSING,
    StepState.FAILED,
    StepState.COMPENSATING,
    StepState.COMPENSATION_FAILED,
    StepState.ERROR,
)
# Runs recorded before it undid what their input named; every new run derives it (cleanup.plan).
DERIVED_PLAN = "cleanup-derives-its-plan"
_PLAN_TIMEOUT = timedelta(seconds=30)
# Temporal or the state store briefly away: asked again, for a while, then the clean-up fails visibly.
_PLAN_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=30
)


@workflow.defn(name="CleanupWorkflow")
class CleanupWorkflow(OperatorHandlers):
    def __init__(self) -> None:
        # What to undo is known only once the plan is read; until then requests find no step.
        self.task = TaskRun()
        self.decisions = Decisions(self.task)
        self.undo = Undo(self.task, self.decisions, children=Children(self.task, self.decisions))

    @workflow.run
    async def run(self, raw: RawValue) -> dict[str, str]:
        cleanup = decode_model(raw, CleanupInput, "clean-up")
        if workflow.patched(DERIVED_PLAN):
            # Only the task's id is taken from the input; what to undo, and whether to undo at
            # all, come from the state store and Temporal.
            cleanup = await workflow.execute_local_activity_method(
                CleanupDefs.plan,
                CleanupRequest(
                    task_id=cleanup.task_id,
                    reason=cleanup.reason[:2000],
                    parent_task_id=cleanup.parent_task_id,
                    parent_step=cleanup.parent_step,
                ),
                start_to_close_timeout=_PLAN_TIMEOUT,
                retry_policy=_PLAN_RETRY,
                summary="check that a clean-up was decided and its task's workflow closed; read what to undo",
            )
        steps = sorted(cleanup.steps, key=lambda s: s.position)
        if not steps:  # a child its parent undoes that had nothing recorded to undo
            return {}
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
        task = self.task
        task.core = TaskCore(status, plan, accepted=True)
        # Processed steps completed in the order of their rows' versions: undone latest first.
        done = sorted((s for s in steps if s.state == StepState.PROCESSED), key=lambda s: s.version)
        task.core.completed = [s.name for s in done]
        # Requests reach it as they would the Scheduler: an operator's compensate retries the undo.
        task.core.compensation = OperatorRequest(by="supervisor", reason=cleanup.reason[:2000])
        task.records = Records(task_id=cleanup.task_id, chain_id=cleanup.chain_id, stamp=CLEANUP_SEQ, clocked=False)
        task.plans = {
            s.name: StepPlan(
                name=s.name,
                position=s.position,
                # A child step's undo is its child's clean-up (shell/children.py), found by its Agent.
                agent=s.agent if s.agent and s.agent.startswith(CHILD_AGENT) else s.compensation or "",
                compensation=s.compensation,
                idempotency_key=s.idempotency_key,
                task_queue=s.task_queue,
            )
            for s in steps
        }
        task.compensation_policy = cleanup.compensation_policy
        task.payload = cleanup.payload
        fan_outs = {s.name: s.fan_out for s in steps if s.fan_out is not None}
        if fan_outs:  # plans read before fan-outs' items were listed have none: nothing changes for them
            self.undo.fan_out = CleanupFanOut(task, self.decisions, fan_outs)
        await self.undo.all_attempted(audit=False)
        return {s.name: str(s.state) for s in task.core.status.steps}
