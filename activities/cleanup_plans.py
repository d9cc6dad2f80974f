"""``cleanup.plan``: what a clean-up may undo, derived from the state store and Temporal.

A clean-up workflow can be started by anyone with access to the namespace (the plain
``temporal workflow start --type CleanupWorkflow``), so it takes from its input only the task's
id. Before it undoes anything it asks this activity, which refuses unless

- the Supervisor decided a clean-up of that task (a ``cleanup`` decision in the state store:
  it found the task's workflow closed from outside), and
- Temporal shows that workflow closed other than by completing (terminated, failed, timed
  out, cancelled): a task that completed, or still runs, is never undone by a clean-up;
- the task is not past its point of no return (its type's pivot step attempted, or a step
  after it run): such a task only ever goes forward, and a closed one is an operator's;

and otherwise builds the plan from the task's rows: its steps, their undo Agents, keys and
queues.

A child task (``ChildTask``) that completed is undone by a clean-up its parent starts, naming
the parent in its input. That path needs no Supervisor decision, and the child's workflow has
completed; instead it refuses unless

- Temporal shows the clean-up itself started by the parent's own workflow (the Scheduler, id
  the parent's task id, or the parent's clean-up): a clean-up started by hand has no parent
  workflow, and only code running as the parent can start one with it;
- the child's row records that parent and step as its own (``tasks.parent_task_id``,
  ``parent_step``), and the parent's rows show it compensating, that step being undone;
- the child is not past its own point of no return.

A child still running is waited for (the activity is retried): its parent's cancellation
reaches it, and it undoes itself. A refusal fails the clean-up at once, non-retryably, with a critical alert that names
the task: somebody started a clean-up nobody decided.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from sas.activities.fanout_items import attempted_items, with_fan_outs
from sas.settings import Settings
from sas.state_store.alerts import raise_alert
from sas.state_store.pivots import past_point_of_no_return
from sas.state_store.queries import TaskRecord, decisions_for, get_task
from sas.state_store.tables import Alert
from sas.task_models.activity_defs import CleanupDefs, implements
from sas.task_models.cleanup import CleanupInput, CleanupRequest, CleanupStep
from sas.task_models.ids import cleanup_workflow_id
from sas.task_models.queues import agent_queue, service_of

# The failure type of a clean-up refused before it undid anything: never retried.
CLEANUP_REFUSED = "CleanupRefused"
# How the task's own workflow may have ended for a clean-up to undo it.
_CLOSED_FROM_OUTSIDE = {
    WorkflowExecutionStatus.TERMINATED,
    WorkflowExecutionStatus.FAILED,
    WorkflowExecutionStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED,
}

log = logging.getLogger("sas.worker")


def cleanup_input(record: TaskRecord, settings: Settings, reason: str) -> CleanupInput:
    """A dead task's clean-up, as the mirror recorded it: every step, its undo and where it runs."""
    return CleanupInput(
        task_id=record.task.task_id,
        task_type=record.task.task_type,
        payload=record.task.payload,
        steps=[
            CleanupStep(
                name=s.name,
                position=s.position,
                state=s.state,
                compensation=s.compensation,
                idempotency_key=s.idempotency_key,
                # The undo runs where the Scheduler's would: on the workflow's queue, or on its
                # service's own, behind its limits and breaker (task_models/queues.py, as
                # mirror.accept plans it).
                task_queue=_undo_queue(record.task.task_queue, s.compensation, settings),
                version=s.version,
                agent=s.agent,
            )
            for s in record.steps
        ],
        compensation_policy=settings.compensation,
        reason=reason,
        chain_id=record.task.chain_id,
    )


def _undo_queue(task_queue: str, compensation: str | None, settings: Settings) -> str | None:
    if compensation is None:
        return None
    service = service_of(compensation)
    return agent_queue(task_queue, service, settings.services.has_own_queue(service))


class CleanupPlans(CleanupDefs):
    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self._sessions = sessions
        self._settings = settings

    @implements(CleanupDefs.plan)
    async def plan(self, request: CleanupRequest) -> CleanupInput:
        if request.parent_task_id is not None:
            return await self._plan_for_parent(request, request.parent_task_id, request.parent_step or "")
        task_id = request.task_id
        async with self._sessions() as session:
            record = await get_task(session, task_id)
            decided = [d for d in await decisions_for(session, task_id) if d.kind == "cleanup"]
        if record is None:
            raise await self._refuse(task_id, "the state store has no such task")
        if not decided:
            raise await self._refuse(
                task_id, "no clean-up of it was decided (the Supervisor decides one when it finds its workflow closed)"
            )
        past = past_point_of_no_return(record.steps)
        if past is not None:
            raise await self._refuse(task_id, f"it is past its point of no return ({past}): it is never undone")
        closed = await self._closed_how(record)
        if closed is not None:
            raise await self._refuse(task_id, closed)
        plan = cleanup_input(record, self._settings, decided[-1].reason or request.reason)
        return with_fan_outs(plan, await attempted_items(record))

    async def _plan_for_parent(self, request: CleanupRequest, parent_id: str, step: str) -> CleanupInput:
        """A completed child's clean-up that its parent started: authorised by the link, in
        Temporal and in the state store, or refused."""
        task_id = request.task_id
        started_by = await self._started_by()
        if started_by not in (parent_id, cleanup_workflow_id(parent_id)):
            who = f"workflow {started_by}" if started_by else "no workflow (started by hand)"
            raise await self._refuse(task_id, f"it names parent {parent_id}, but was started by {who}")
        async with self._sessions() as session:
            record = await get_task(session, task_id)
            parent = await get_task(session, parent_id)
        if record is None or parent is None:
            raise await self._refuse(task_id, "the state store has no such task, or no such parent")
        link = (record.task.parent_task_id, record.task.parent_step)
        if link != (parent_id, step):
            raise await self._refuse(
                task_id, f"its recorded parent is {link[0]} step {link[1]}, not {parent_id} {step}"
            )
        undoing = next((s.state for s in parent.steps if s.name == step), None)
        if parent.task.state != "Compensating" or undoing != "Compensating":
            raise await self._refuse(
                task_id, f"its parent {parent_id} is {parent.task.state} (step {step} {undoing}), not undoing it"
            )
        past = past_point_of_no_return(record.steps)
        if past is not None:
            raise await self._refuse(task_id, f"it is past its point of no return ({past}): it is never undone")
        if await self._running(task_id):
            # Its parent's cancellation reached it: it undoes itself; retried until it has ended.
            raise ApplicationError(f"child task {task_id} still runs; waiting for it to end", type="ChildRunning")
        plan = cleanup_input(record, self._settings, request.reason or f"undone by its parent {parent_id}")
        return with_fan_outs(plan, await attempted_items(record))

    async def _started_by(self) -> str | None:
        """The workflow id of this clean-up's parent workflow, as Temporal recorded its start."""
        info = activity.info()
        handle = activity.client().get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
        return (await handle.describe()).parent_id

    async def _running(self, task_id: str) -> bool:
        try:
            described = await activity.client().get_workflow_handle(task_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return described.status == WorkflowExecutionStatus.RUNNING

    async def _closed_how(self, record: TaskRecord) -> str | None:
        """Why the task's workflow is not one a clean-up may undo, or None if it may."""
        handle = activity.client().get_workflow_handle(record.task.task_id, run_id=record.task.run_id)
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return "Temporal does not know its workflow: nothing is undone on the state store's word alone"
            raise  # Temporal unreachable: the activity is retried
        if described.status in _CLOSED_FROM_OUTSIDE:
            return None
        status = described.status.name.lower() if described.status else "unknown"
        return f"its workflow is {status}, not closed from outside: a clean-up never undoes it"

    async def _refuse(self, task_id: str, why: str) -> ApplicationError:
        now = datetime.now(UTC)
        message = f"a clean-up of task {task_id} was started and refused: {why}"
        alert = Alert(
            incident_key=f"cleanup_refused:{task_id}",
            severity="critical",
            kind="cleanup_refused",
            task_id=task_id,
            step=None,
            failure_count=0,
            message=message,
            last_error=None,
            suggested_action=(
                f"nothing was undone; find who started {cleanup_workflow_id(task_id)} (its history in the Temporal UI names the "
                "client's identity), then `sas alerts resolve`"
            ),
            status="open",
            created_at=now,
            updated_at=now,
            delivery_attempts=0,
        )
        async with self._sessions() as session, session.begin():
            await raise_alert(session, alert)
        log.error("%s", message, extra={"fields": {"task_id": task_id}})
        return ApplicationError(message, type=CLEANUP_REFUSED, non_retryable=True)
