"""Which workflow answers for a task: the one place the operator commands ask.

A task's own Scheduler workflow (id = task id) answers while it runs. Once it is closed from
outside (terminated, timed out, failed), the Supervisor starts a clean-up workflow,
``cleanup-<task id>`` (``supervisor/detect/orphans.py``, ``workflows/cleanup.py``), which undoes the
task from what the mirror recorded. While that runs, *it* answers for the task: it takes the
same ``request_retry`` / ``request_compensate`` updates and ``retry`` / ``compensate`` /
``park`` signals as a Scheduler, so ``sas retry``, ``sas compensate`` and ``sas park`` (one
task and bulk) send them there, and ``sas resubmit`` waits until it has finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sas.task_models.ids import CLEANUP_PREFIX as CLEANUP_PREFIX
from sas.task_models.ids import cleanup_workflow_id as cleanup_id

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecutionDescription


@dataclass(frozen=True)
class Answering:
    """The workflow to send a task's requests to, and how the task's own Scheduler stands.

    ``described`` is what Temporal said of ``workflow_id``'s newest run when it was asked (None:
    Temporal has none), so the action that follows reads its pending activities and its status
    from it instead of describing the workflow again."""

    task_id: str
    workflow_id: str
    scheduler_status: str | None  # the newest Scheduler run: RUNNING, COMPLETED, TERMINATED...; None: none
    described: WorkflowExecutionDescription | None = None

    @property
    def cleanup(self) -> bool:
        """True when the clean-up workflow answers (the Scheduler is closed)."""
        return self.workflow_id != self.task_id

    @property
    def running(self) -> bool:
        """True when the workflow that answers runs: a request sent to it can be applied."""
        return self.cleanup or self.scheduler_status == "RUNNING"


async def answering_workflow(client: Client, task_id: str) -> Answering:
    """The task's Scheduler while it runs; else its clean-up workflow while that runs; else the
    Scheduler's id (closed or unknown), whose answer says so. One describe while the Scheduler
    runs; two (the Scheduler, then its clean-up) once it is closed."""
    scheduler = await describe(client, task_id)
    status = _status(scheduler)
    if status != "RUNNING":
        cleanup = await describe(client, cleanup_id(task_id))
        if _status(cleanup) == "RUNNING":
            return Answering(task_id, cleanup_id(task_id), status, cleanup)
    return Answering(task_id, task_id, status, scheduler)


async def run_status(client: Client, workflow_id: str) -> str | None:
    """The newest run's status name (RUNNING, COMPLETED, FAILED, ...), or None if Temporal has none."""
    return _status(await describe(client, workflow_id))


async def describe(client: Client, workflow_id: str) -> WorkflowExecutionDescription | None:
    """The newest run of ``workflow_id`` as Temporal describes it, or None if Temporal has none."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


def _status(described: WorkflowExecutionDescription | None) -> str | None:
    if described is None or described.status is None:
        return None
    return described.status.name
