"""A task id is one task, forever: a finished task started again under its id, by any
route, undoes nothing and changes nothing; the new run fails at once, non-retryably,
naming the task's state and how to run it again.

Run on SQLite and PostgreSQL (``stack_any_db``)."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError

from sas.task_models import TaskResult, TaskState
from tests.e2e.test_temporal_cli import temporal_cli
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

DECLINED = "4000000000000002"


async def _snapshot(stack: Stack, task_id: str) -> tuple[object, ...]:
    record = await stack.record(task_id)
    assert record is not None
    rows = [(s.name, s.state, s.version, s.run_id, s.idempotency_key) for s in record.steps]
    return record.task.state, record.task.version, record.task.run_id, record.task.chain_id, rows


async def _reuse_with_client(stack: Stack, task_id: str) -> None:
    await stack.client.start_workflow(
        "OrderWorkflow",
        order(),
        id=task_id,
        task_queue=stack.settings.temporal.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )


async def _reuse_with_temporal_cli(stack: Stack, task_id: str) -> None:
    # The CLI's default id reuse policy allows a new run once the old one has closed.
    done = await temporal_cli(
        stack.settings.temporal.address,
        *("workflow", "start", "--type", "OrderWorkflow", "--workflow-id", task_id),
        *("--task-queue", stack.settings.temporal.task_queue, "--input", json.dumps(order().model_dump())),
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("route", [_reuse_with_client, _reuse_with_temporal_cli], ids=["client", "temporal-cli"])
@pytest.mark.parametrize("outcome", ["completed", "compensated"])
async def test_a_finished_task_started_again_changes_nothing(stack_any_db: Stack, route, outcome: str) -> None:
    stack = stack_any_db
    task_id = fresh_id("once")
    first = await stack.submit(task_id, order(card=DECLINED) if outcome == "compensated" else order())
    result: TaskResult = await first.result()
    assert result.state == (TaskState.PROCESSED if outcome == "completed" else TaskState.COMPENSATED)
    ledger_before = await stack.ledger(task_id)
    rows_before = await _snapshot(stack, task_id)
    decisions_before = [(d.kind, d.decided_at) for d in await stack.decisions(task_id)]

    await route(stack, task_id)
    second = stack.client.get_workflow_handle(task_id)  # the newest run
    with pytest.raises(WorkflowFailureError) as failed:
        await second.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "TaskIdReused" and cause.non_retryable
    state = "Processed" if outcome == "completed" else "Compensated"
    assert f"already exists and is {state}" in cause.message
    assert ("sas resubmit" in cause.message) == (outcome == "compensated")
    # The second run was refused before anything: it failed on its first workflow task.
    assert (await second.describe()).raw_description.workflow_execution_info.history_length < 20

    # Give the Supervisor two sweeps to misread the refused run; it must not act on it.
    await supervisor_sweeps(stack, 2)
    assert await stack.ledger(task_id) == ledger_before
    assert await _snapshot(stack, task_id) == rows_before
    assert [(d.kind, d.decided_at) for d in await stack.decisions(task_id)] == decisions_before


async def supervisor_sweeps(stack: Stack, n: int) -> None:
    """Wait until the test's Supervisor has swept ``n`` more times."""
    handle = stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id)
    start = await handle.query("sweeps", result_type=int)
    await wait_until(lambda: handle.query("sweeps", result_type=int), lambda s: s >= start + n, what=f"{n} sweeps")
