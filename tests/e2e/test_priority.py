"""Priority (issue 13, item 8): a task's priority, given at submit, is Temporal's task priority,
so an urgent task overtakes a backlog on the same queue (the dev server honours it; see
docs/operator.md). Activities inherit the workflow's priority: every step of the task has it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime

import pytest_asyncio
from temporalio.client import Client
from temporalio.common import Priority

from remote_services.launcher import ServiceProcess
from task_models import TaskResult, TaskState
from tests import stack as stacks
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack, order, start_stack

BACKLOG = 10


async def test_sas_submit_priority_reaches_temporal(stack: Stack) -> None:
    task_id = fresh_id("prio-cli")
    done = await sas(
        stack, "submit", "--id", task_id, "--priority", "1", "--sku", "S-1", "--quantity", "1",
        "--amount-cents", "100", "--customer", "c1", "--address", "1 Main St", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert as_json(done)["task_id"] == task_id

    described = await stack.client.get_workflow_handle(task_id).describe()
    assert described.raw_description.workflow_execution_info.priority.priority_key == 1
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED


async def test_sas_submit_refuses_a_priority_out_of_range(stack: Stack) -> None:
    done = await sas(stack, "submit", "--priority", "9", "--sku", "S-1", "--quantity", "1",
                     "--amount-cents", "100", "--customer", "c1", "--address", "1 Main St")  # fmt: skip
    assert done.returncode != 0
    assert "--priority must be 1 (most urgent) to 5 (least), got 9" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


@pytest_asyncio.fixture
async def backlog_queue(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[tuple[Client, str, list[str], str]]:
    """A backlog of low-priority orders, then one urgent order, on a queue no worker polls yet."""
    queue = f"prio-{uuid.uuid4().hex[:10]}"
    backlog = [fresh_id("prio-low") for _ in range(BACKLOG)]
    urgent = fresh_id("prio-urgent")
    for task_id in [*backlog, urgent]:
        await client.start_workflow(
            "OrderWorkflow",
            order(),
            id=task_id,
            task_queue=queue,
            priority=Priority(priority_key=1 if task_id == urgent else 5),
        )
    yield client, queue, backlog, urgent


async def test_an_urgent_order_overtakes_a_backlog(
    backlog_queue: tuple[Client, str, list[str], str],
    temporal_address: str,
    services: ServiceProcess,
    sqlite_url: str,
) -> None:
    client, queue, backlog, urgent = backlog_queue
    base = stacks.test_settings(temporal_address, services.url, sqlite_url)
    temporal = base.temporal.model_copy(update={"task_queue": queue})
    # One step at a time: the activity slot is the bottleneck the tasks queue for. (Workflow tasks
    # are left free: one slot for them stalls sticky workflow tasks until their 10 s timeout.)
    one_at_a_time = {"max_concurrent_activities": 1}
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, supervisor=False, worker_options=one_at_a_time,
        temporal=temporal,
    ):  # fmt: skip
        closed: dict[str, datetime] = {}
        for task_id in [*backlog, urgent]:
            handle = client.get_workflow_handle(task_id, result_type=TaskResult)
            assert (await handle.result()).state == TaskState.PROCESSED
            described = await handle.describe()
            assert described.close_time is not None
            closed[task_id] = described.close_time

    before_urgent = [task_id for task_id in backlog if closed[task_id] < closed[urgent]]
    # Submitted last, it finished before all but at most two of the backlog submitted ahead of
    # it. (The same run with every order at priority 5 put 3 to 5 of the backlog before it: a
    # few low orders get their first steps in before the urgent one's first workflow task runs.)
    assert len(before_urgent) <= 2, sorted(closed, key=closed.__getitem__)
