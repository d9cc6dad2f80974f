"""How Temporal sees a task right now - what the Supervisor checks before it acts.

The mirror follows Temporal, never leads it: a row can be stale (a lost write, a reset,
workers that are down), so before the Supervisor retries, compensates or parks a task it
asks Temporal about that task's workflow. A finished workflow is never the subject of a
decision; a step that only waits for a worker is not overdue; a decision the workflow
has not yet taken in (no worker to run its workflow task) is not followed by another.

A fan-out step's Agents run in its batch child workflows, not in the task's own: the look
describes each batch the task's workflow shows running, so a fan-out item is looked at (paused,
waiting for a worker, within its time) as a step's own activity is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from temporalio.api.enums.v1 import PendingActivityState, PendingWorkflowTaskState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from sas.task_models.fanout import batch_activities, running_batches
from sas.task_models.pauses import is_paused

Status = Literal["running", "completed", "closed", "gone"]

# A workflow task on its second attempt or later has failed and been retried without success
# since: not a passing fault. The orphan check alerts on it; no decision is taken for it.
STUCK_WORKFLOW_TASK_ATTEMPTS = 2

_CLOSED = {
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "timed out",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "continued as new",
}


@dataclass
class TemporalView:
    """One task's workflow as Temporal describes it (the run of the task's own chain)."""

    status: Status
    how: str = ""
    run_id: str | None = None
    first_run_id: str | None = None  # the chain the described run belongs to
    description: WorkflowExecutionDescription | None = None
    # A workflow task is waiting: events (a signal, an activity's end) the workflow has not taken in yet.
    workflow_task_pending: bool = False
    workflow_task_started: bool = False
    workflow_task_attempt: int = 0
    workflow_task_scheduled: datetime | None = None
    activities: list[PendingActivityInfo] = field(default_factory=list)
    # Each running fan-out batch (its workflow id) and its items' pending activities.
    batches: dict[str, list[PendingActivityInfo]] = field(default_factory=dict)

    def activity_for(self, names: tuple[str | None, ...]) -> PendingActivityInfo | None:
        """The pending activity running one of ``names`` (a step's Agent or its undo), the task's
        own or a fan-out item's in one of its batches; a paused one first, since one paused item
        holds its whole step however many others run within their time."""
        found = [a for a in self.all_activities() if a.activity_type.name in names]
        return next((a for a in found if is_paused(a)), None) or next(iter(found), None)

    def all_activities(self) -> list[PendingActivityInfo]:
        """The task's own pending activities, then its batches' items'."""
        return [*self.activities, *(a for items in self.batches.values() for a in items)]

    def batch_of(self, pending: PendingActivityInfo) -> str | None:
        """The fan-out batch that runs ``pending`` (this view's own object), or None: the task's own."""
        return next((b for b, items in self.batches.items() if any(a is pending for a in items)), None)


async def look(client: Client, task_id: str, chain_id: str | None, run_id: str | None) -> TemporalView:
    """Describe the task's workflow: the newest run, if it belongs to the task's chain of runs,
    else the run that last wrote the mirror (the newest run may be a refused reuse of the id)."""
    try:
        described = await client.get_workflow_handle(task_id).describe()
        first_run = described.raw_description.workflow_execution_info.first_run_id
        if chain_id is not None and first_run and first_run != chain_id and run_id:
            described = await client.get_workflow_handle(task_id, run_id=run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return TemporalView(status="gone", how="not found in Temporal (its history may have expired)")
        raise
    raw = described.raw_description
    first_run_id = raw.workflow_execution_info.first_run_id or None
    view = TemporalView(status="running", run_id=described.run_id, first_run_id=first_run_id, description=described)
    if described.status == WorkflowExecutionStatus.COMPLETED:
        view.status, view.how = "completed", "completed"
    elif described.status in _CLOSED:
        when = described.close_time.isoformat(timespec="seconds") if described.close_time else "?"
        view.status, view.how = "closed", f"{_CLOSED[described.status]} at {when}"
    if raw.HasField("pending_workflow_task"):
        task = raw.pending_workflow_task
        view.workflow_task_pending = True
        view.workflow_task_started = task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
        view.workflow_task_attempt = task.attempt
        if task.HasField("scheduled_time"):
            view.workflow_task_scheduled = task.scheduled_time.ToDatetime(tzinfo=UTC)
    view.activities = list(raw.pending_activities)
    if view.status == "running":
        view.batches = await batch_activities(client, running_batches(raw))
    return view


def waiting_reason(view: TemporalView, names: tuple[str | None, ...], now: datetime, grace_s: float) -> str | None:
    """Why the step's lateness is not the step's fault, or None if the Supervisor may act.

    - the workflow has events it has not taken in (a decision already sent, an activity that
      ended): no worker has run its workflow task yet, so deciding again would count twice;
    - the step's activity is scheduled but not started: it waits for a worker (or for
      Temporal's next quick retry), and complete-by counts only time an attempt runs;
    - the step's activity is running and within its own start-to-close timeout.
    """
    if view.workflow_task_pending and view.workflow_task_attempt >= STUCK_WORKFLOW_TASK_ATTEMPTS:
        # Its workflow task keeps failing (code that does not match its history, a payload it
        # cannot decrypt): it cannot take a decision in, and a signal sent now would queue up
        # and run once it is fixed - a compensate nobody meant. The workflow_stuck alert says so.
        return f"its workflow task keeps failing (attempt {view.workflow_task_attempt}): it cannot act on a decision"
    if view.workflow_task_pending and not view.workflow_task_started:
        return "waiting for a worker to run its workflow task (no workflow worker is polling, or all are busy)"
    pending = view.activity_for(names)
    if pending is None:
        return None
    if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
        if pending.attempt > 1 and pending.HasField("last_failure"):
            return f"Temporal is retrying it (attempt {pending.attempt} scheduled)"
        return "waiting for a worker to pick up its activity"
    if is_paused(pending):
        return "its activity is paused by an operator"
    if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED and pending.HasField("last_started_time"):
        started = pending.last_started_time.ToDatetime(tzinfo=UTC)
        timeout = _start_to_close(view, pending)
        if timeout is not None and now < started + timeout + timedelta(seconds=grace_s):
            return f"its attempt {pending.attempt} started at {started.isoformat(timespec='seconds')} is still within its time"
    return None


def _start_to_close(view: TemporalView, pending: PendingActivityInfo) -> timedelta | None:
    if pending.HasField("activity_options") and pending.activity_options.HasField("start_to_close_timeout"):
        return pending.activity_options.start_to_close_timeout.ToTimedelta()
    return None
