"""Where a task stands, from whoever knows best: its running Scheduler, else the state store,
else Temporal (a run that ended before sas accepted it, or a delayed start not yet run).

The answer is the JSON-ready view ``sas status --json`` prints; ``TaskView`` gives it types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from sas.client.answering import describe
from sas.client.store import StateStore
from sas.task_models import TaskState, TaskStatus


@dataclass(frozen=True)
class TaskView:
    """A task as sas sees it now.

    ``source`` says who answered: ``scheduler`` (its running workflow), ``state store`` (the
    mirror: the workflow has closed or does not answer), ``temporal`` (the run ended before sas
    accepted it: ``accepted`` is False and ``data["reason"]`` says why) or ``delayed`` (a start
    delay not yet over, ``state`` Scheduled, or cancelled before it ran, ``state`` Cancelled).
    ``data`` is the whole view as ``sas status --json`` prints it."""

    task_id: str
    state: str
    source: str
    current_step: str | None
    needs_operator: bool
    accepted: bool
    data: dict[str, Any]

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Each step: name, position, state, failure_count, runs, last_error, error_type, note."""
        return list(self.data.get("steps", []))

    @classmethod
    def of(cls, source: str, data: dict[str, Any]) -> TaskView:
        return cls(
            task_id=data["task_id"],
            state=str(data["state"]),
            source=source,
            current_step=data.get("current_step"),
            needs_operator=bool(data.get("needs_operator")),
            accepted=data.get("accepted") is not False,
            data=data,
        )


async def query_status(client: Client, task_id: str, run_id: str | None = None) -> TaskStatus | None:
    """The Scheduler's own answer (its newest run's, or ``run_id``'s), or None if Temporal has no such run."""
    try:
        return await client.get_workflow_handle(task_id, run_id=run_id).query(
            "status", result_type=TaskStatus, rpc_timeout=timedelta(seconds=5)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def newest_run(client: Client, task_id: str) -> tuple[str | None, str | None] | None:
    """The id's newest run: its status name (RUNNING, COMPLETED, ...) and its chain (the first
    run id, which a reset keeps); None if Temporal has no such workflow."""
    described = await describe(client, task_id)
    if described is None:
        return None
    status = described.status.name if described.status is not None else None
    return status, described.raw_description.workflow_execution_info.first_run_id or None


async def fetch_status(client: Client, store: StateStore, task_id: str) -> dict[str, Any] | None:
    """The task as its running Scheduler answers, else as the state store has it.

    The Scheduler is asked only when the newest run of the id is of the task's chain and is
    running or completed: a later run may be a refused reuse of the id (someone started it
    again; that run says Pending, all steps Pending, and ends TaskIdReused), and a run closed
    from outside answers with its last word, while the state store also has what its clean-up
    did since."""
    from sas.runtime.failures import StateStoreUnreachable
    from sas.state_store.queries import get_task

    down: StateStoreUnreachable | None = None
    try:
        record = await store.read(lambda s: get_task(s, task_id))
    except StateStoreUnreachable as err:
        record, down = None, err  # down for now: the Scheduler may still answer
    live = None
    try:
        newest = await newest_run(client, task_id)
    except RPCError:
        newest = None
    # A run closed from outside (terminated, timed out) may since have been cleaned up, and a
    # run of another chain is not the task's: the state store has the task then.
    ours = record is None or (newest is not None and newest[1] in (None, record.task.chain_id))
    if newest is not None and ours and newest[0] in ("RUNNING", "COMPLETED"):
        try:
            live = await query_status(client, task_id)
        except RPCError:
            live = None  # no worker to answer, or not started yet: the state store still knows
    if live is not None and live.steps:
        return {"source": "scheduler", **live.model_dump(mode="json")}
    if down is not None:
        raise down
    if record is None:
        # A run that failed before it was accepted (its input refused) answers a query with the
        # Pending it never left: Temporal's word on how it ended is the task's story. (A delayed
        # run cancelled before its start is terminated: ``scheduled`` tells that story.)
        failed = newest is not None and newest[0] == "FAILED"
        return await closed_before_accepted(client, task_id) if failed else None
    return {
        "source": "state store",
        "task_id": task_id,
        "task_type": record.task.task_type,
        "state": record.task.state,
        "current_step": record.task.current_step,
        "needs_operator": record.task.state == TaskState.ERROR,
        "steps": [
            {
                "name": s.name,
                "position": s.position,
                "state": s.state,
                "failure_count": s.failure_count,
                "runs": None,
                "last_error": s.last_error,
                "error_type": s.error_type,
                "note": getattr(s, "note", None),
            }
            for s in record.steps
        ],
        "events": [],
    }


async def add_running_items(client: Client, task_id: str, steps: list[dict[str, Any]]) -> None:
    """A running fan-out's counts with the items its running batches have answered so far.

    The Scheduler learns its items' outcomes when their batch answers (a batch is a child
    workflow; its answer is one event), so its own counts move once a wave. Each batch answers
    a ``progress`` query with the items it has ended: read here, they cost no event in either
    history, where a signal to the parent per item would cost both. Asked only of a task with a
    fan-out step Processing: one describe, and one query per running batch."""
    from sas.task_models import StepState
    from sas.task_models.fanout import PROGRESS_QUERY, BatchProgress, describe_counts, running_batches, with_ended

    running = {
        s["name"]: s
        for s in steps
        if s["state"] == StepState.PROCESSING and isinstance(s.get("result"), dict) and s["result"].get("processing")
    }
    if not running:
        return
    try:
        described = await client.get_workflow_handle(task_id).describe()
        ended: dict[str, dict[str, int]] = {}
        for batch in running_batches(described.raw_description):
            progress = await client.get_workflow_handle(batch).query(PROGRESS_QUERY, result_type=BatchProgress)
            if progress.undo or progress.step not in running:
                continue
            into = ended.setdefault(progress.step, {})
            for state, n in progress.ended.items():
                into[state] = into.get(state, 0) + n
    except RPCError:
        return  # a batch that no worker answers for now: the Scheduler's own counts stand
    for name, counts in ended.items():
        step = running[name]
        step["result"] = with_ended(step["result"], counts)
        step["note"] = describe_counts(step["result"])


_ENDED_BEFORE = {"FAILED": "Failed", "TERMINATED": "Terminated", "CANCELED": "Cancelled", "TIMED_OUT": "TimedOut"}


async def closed_before_accepted(client: Client, task_id: str) -> dict[str, Any] | None:
    """The newest run of ``task_id`` if it ended without completing (the caller knows the state
    store has no such task), with the reason Temporal recorded; None otherwise.

    A run started without sas (plain ``temporal workflow start``, a team's own client) with
    input its task type refuses fails at once, before its first write: its story is Temporal's."""
    described = await describe(client, task_id)
    if described is None:
        return None
    handle = client.get_workflow_handle(task_id)
    status = described.status.name if described.status is not None else ""
    if status not in _ENDED_BEFORE:
        return None
    reason, error_type = "", None
    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        cause = err.cause
        reason = " ".join(str(getattr(cause, "message", None) or cause or err).split())
        error_type = getattr(cause, "type", None)
    return {
        "source": "temporal",
        "task_id": task_id,
        "task_type": None,
        "workflow_type": described.workflow_type,
        "run_id": described.run_id,
        "state": _ENDED_BEFORE[status],
        "accepted": False,
        "error_type": error_type,
        "reason": reason,
        "current_step": None,
        "needs_operator": False,
        "steps": [],
    }


async def scheduled(client: Client, task_id: str) -> dict[str, Any] | None:
    """When a task that has not run yet starts (a delayed start), or that it was cancelled before
    it ran; None if Temporal has no such task, or it has run. Until its delay ends, Temporal has
    the workflow but no workflow task: the Scheduler cannot answer and the store has no row."""
    described = await describe(client, task_id)
    if described is None:
        return None
    if described.status == WorkflowExecutionStatus.TERMINATED and _never_ran(described):
        # A delayed task is cancelled by terminating it before its first workflow task.
        history = await client.get_workflow_handle(task_id, run_id=described.run_id).fetch_history()
        ended = history.events[-1].workflow_execution_terminated_event_attributes
        return {
            "task_id": task_id,
            "task_type": described.workflow_type,
            "state": "Cancelled",
            "cancelled_at": described.close_time.isoformat() if described.close_time else None,
            "reason": ended.reason,
        }
    if described.status != WorkflowExecutionStatus.RUNNING or described.execution_time is None:
        return None
    return {
        "task_id": task_id,
        "task_type": described.workflow_type,
        "state": "Scheduled",
        "scheduled_for": described.execution_time.isoformat(),
        "due": described.execution_time <= datetime.now(UTC),
    }


def _never_ran(described: Any) -> bool:
    # Started, then terminated: no workflow task ever ran, so the task never started.
    return int(described.raw_description.workflow_execution_info.history_length) <= 2
