"""Waiting for a task (``sas submit --wait``, ``TaskClient.wait``): until it has an outcome a
script can act on, said with the exit code (docs/cli.md, "Exit codes").

A task ends Processed or Compensated, or its workflow fails (invalid input, a reuse of its id)
or is closed from outside; a task parked for an operator has not ended, and may not for days,
so waiting stops there too: it is an outcome somebody must act on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError, TerminatedError, TimeoutError
from temporalio.service import RPCError

from sas.task_models import TaskResult, TaskState, TaskStatus

EXIT_PROCESSED = 0
EXIT_COMPENSATED = 3
EXIT_NEEDS_OPERATOR = 4
EXIT_WORKFLOW_FAILED = 5
# How often the task is asked whether it waits for an operator while its result is awaited.
_LOOK_EVERY_S = 1.0
_QUERY_TIMEOUT = timedelta(seconds=5)


@dataclass
class Outcome:
    """Where a waited-for task stands: its state, the exit code that says it, and what to show."""

    state: str
    code: int
    detail: str
    result: dict[str, Any] | None = None


async def wait_for_outcome(client: Client, task_id: str) -> Outcome:
    """Wait until ``task_id`` ends, or needs an operator."""
    handle = client.get_workflow_handle(task_id, result_type=TaskResult)
    ended = asyncio.ensure_future(handle.result())
    try:
        while True:
            done, _ = await asyncio.wait({ended}, timeout=_LOOK_EVERY_S)
            if ended in done:
                return _ended(ended)
            try:
                status = await handle.query("status", result_type=TaskStatus, rpc_timeout=_QUERY_TIMEOUT)
            except RPCError:
                continue  # no worker answers queries just now: the result is still awaited
            if status.needs_operator:
                where = f"step {status.current_step}" if status.current_step else "the task"
                return Outcome(str(status.state), EXIT_NEEDS_OPERATOR, f"{where} waits for an operator (parked)")
    finally:
        ended.cancel()


def _ended(ended: asyncio.Future[TaskResult]) -> Outcome:
    try:
        result = ended.result()
    except WorkflowFailureError as err:
        cause = err.cause
        message = getattr(cause, "message", None) or str(cause or err)
        closed = {TerminatedError: "Terminated", CancelledError: "Cancelled", TimeoutError: "TimedOut"}
        state = next((name for kind, name in closed.items() if isinstance(cause, kind)), "Failed")
        return Outcome(state, EXIT_WORKFLOW_FAILED, " ".join(message.split()))
    code = EXIT_PROCESSED if result.state == TaskState.PROCESSED else EXIT_COMPENSATED
    detail = "done" if code == EXIT_PROCESSED else "undone as a whole"
    return Outcome(str(result.state), code, detail, result.model_dump(mode="json"))
