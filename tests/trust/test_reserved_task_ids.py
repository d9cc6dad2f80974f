"""Only what sas did drives a task: the id shapes sas derives from a task's (``cleanup-<task>``,
``<task>:<step>``, ``<task>:<step>:batch-<n>``) and the one Temporal gives a schedule's runs
(``<schedule>-<time>``) are refused as a task's id at every way in: the task client, the CLI
(``sas submit``, ``sas schedule create``, ``sas resubmit``, ``sas reschedule``), and a task
type's workflow started directly (``temporal workflow start``), whose input check fails it at
once, non-retryably, before it writes or calls anything. The runs sas and Temporal derive those
ids for (a schedule's run here; a child task in tests/supervisor/test_child_tasks.py) still run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.client import (
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowFailureError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from sas.api.client import TaskClient
from sas.client.errors import InvalidInput
from sas.task_models import TaskResult, TaskState
from sas.task_models.ids import cleanup_workflow_id
from sas.workflows.core.children import child_task_id
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


def reserved_ids(victim: str) -> dict[str, str]:
    """Each shape, as sas (or Temporal) derives it for the task ``victim``."""
    return {
        "clean-up": cleanup_workflow_id(victim),
        "child": child_task_id(victim, "charge"),
        "fan-out batch": f"{victim}:charge:batch-1",
        "scheduled run": f"{victim}-2026-01-01T00:00:00Z",
    }


@pytest.mark.parametrize("shape", list(reserved_ids("x")))
async def test_a_task_type_started_directly_under_a_reserved_id_fails_at_once_and_does_nothing(
    stack_no_supervisor: Stack, shape: str
) -> None:
    stack = stack_no_supervisor
    victim = fresh_id("victim")
    task_id = reserved_ids(victim)[shape]
    handle = await stack.client.start_workflow(
        "OrderWorkflow", order(), id=task_id, task_queue=stack.settings.temporal.task_queue
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=60)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput" and cause.non_retryable
    assert f"task id {task_id!r} is reserved" in cause.message, cause.message
    # Refused before its accept: no rows, no calls.
    assert await stack.record(task_id) is None
    assert await stack.ledger(task_id) == []


async def test_a_schedule_s_run_keeps_the_id_temporal_gives_it_and_is_run_again_only_anew(stack: Stack) -> None:
    """The run, started by Temporal, is accepted and undone like any task (a declined card);
    running it again under its id would be a run started by hand under a reserved id, which its
    workflow would refuse: `sas resubmit` says so first."""
    schedule_id = fresh_id("nightly")
    await stack.client.create_schedule(
        schedule_id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                "OrderWorkflow",
                order(card="4000000000000002"),
                id=schedule_id,
                task_queue=stack.settings.temporal.task_queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]),
        ),
    )
    schedule = stack.client.get_schedule_handle(schedule_id)
    try:
        await schedule.trigger()
        described = await wait_until(schedule.describe, lambda d: bool(d.info.recent_actions), what="a run")
        action = described.info.recent_actions[0].action
        assert isinstance(action, ScheduleActionExecutionStartWorkflow)
        run_id = action.workflow_id
        assert run_id.startswith(f"{schedule_id}-") and ":" in run_id
        result = await asyncio.wait_for(
            stack.client.get_workflow_handle(run_id, result_type=TaskResult).result(), timeout=60
        )
        assert result.state == TaskState.COMPENSATED
        done = await sas(stack, "resubmit", run_id, "--reason", "again")
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert f"task id {run_id!r} is reserved" in " ".join(done.stderr.split()), done.stderr
        assert await stack.task_state(run_id) == "Compensated"
    finally:
        await schedule.delete()


@pytest.mark.parametrize("shape", list(reserved_ids("x")))
async def test_the_task_client_refuses_a_reserved_id_before_anything_is_started(
    stack_no_supervisor: Stack, shape: str
) -> None:
    stack = stack_no_supervisor
    task_id = reserved_ids(fresh_id("victim"))[shape]
    with pytest.raises(InvalidInput, match="is reserved") as refused:
        await TaskClient(stack.client, stack.settings).submit("order", order(), task_id=task_id)
    assert refused.value.field == "task_id"
    with pytest.raises(RPCError) as missing:
        await stack.client.get_workflow_handle(task_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_the_cli_refuses_a_reserved_id_in_one_line(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    victim = fresh_id("victim")
    for task_id in reserved_ids(victim).values():
        done = await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert f"task id {task_id!r} is reserved" in " ".join(done.stderr.split()), done.stderr
        assert await stack.record(task_id) is None
    for schedule_id in ("cleanup", f"{victim}:charge", f"cleanup-{victim}"):
        done = await sas(stack, "schedule", "create", schedule_id, "--every", "1d", *ORDER_FLAGS)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert f"schedule id {schedule_id!r} is reserved" in " ".join(done.stderr.split()), done.stderr
    task_id = cleanup_workflow_id(victim)
    done = await sas(stack, "reschedule", task_id, "--in", "1h", "--reason", "later")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"task id {task_id!r} is reserved" in " ".join(done.stderr.split()), done.stderr
