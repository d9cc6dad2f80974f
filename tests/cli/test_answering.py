"""Which workflow answers for a task (``sas/cli/answering.py``): its Scheduler while that runs;
once it is closed, its clean-up workflow ``cleanup-<id>`` while that runs. On the real dev
server, with workflows started (and closed) by id; no worker is needed to ask Temporal."""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client

from sas.cli.answering import answering_workflow, cleanup_id
from sas.task_models.ids import cleanup_workflow_id
from tests.cli.test_cli import sas
from tests.helpers import fresh_id
from tests.stack import Stack, order


async def _start(client: Client, workflow_id: str, workflow: str = "OrderWorkflow") -> None:
    await client.start_workflow(
        workflow,
        order(),
        id=workflow_id,
        task_queue=fresh_id("no-worker"),
        execution_timeout=timedelta(minutes=10),
    )


def test_the_clean_up_id_is_the_supervisors() -> None:
    assert cleanup_id("order-1") == cleanup_workflow_id("order-1")


async def test_the_scheduler_answers_while_it_runs_then_its_clean_up(client: Client) -> None:
    task_id = fresh_id("answering")
    unknown = await answering_workflow(client, task_id)
    assert (unknown.workflow_id, unknown.scheduler_status, unknown.cleanup) == (task_id, None, False)

    await _start(client, task_id)
    running = await answering_workflow(client, task_id)
    assert (running.workflow_id, running.scheduler_status) == (task_id, "RUNNING")

    await _start(client, cleanup_id(task_id), "CleanupWorkflow")
    # Both running: the Scheduler still answers (the clean-up only takes over a closed task).
    assert (await answering_workflow(client, task_id)).workflow_id == task_id

    await client.get_workflow_handle(task_id).terminate("closed from outside")
    closed = await answering_workflow(client, task_id)
    assert (closed.workflow_id, closed.scheduler_status, closed.cleanup) == (cleanup_id(task_id), "TERMINATED", True)

    await client.get_workflow_handle(cleanup_id(task_id)).terminate("clean-up over")
    done = await answering_workflow(client, task_id)
    assert (done.workflow_id, done.cleanup) == (task_id, False)


async def test_resubmit_waits_for_a_running_clean_up(stack: Stack) -> None:
    task_id = fresh_id("resubmit-cleanup")
    await _start(stack.client, task_id)
    await stack.client.get_workflow_handle(task_id).terminate("closed from outside")
    await _start(stack.client, cleanup_id(task_id), "CleanupWorkflow")
    try:
        done = await sas(stack, "resubmit", task_id, "--reason", "again")
        assert done.returncode == 1
        assert f"its clean-up cleanup-{task_id} is still undoing it; finish it first" in done.stderr
        assert f"sas retry {task_id}" in done.stderr and f"sas compensate {task_id}" in done.stderr
        # Nothing new started: the newest run of the id is still the terminated one.
        described = await stack.client.get_workflow_handle(task_id).describe()
        assert described.status is not None and described.status.name == "TERMINATED"
    finally:
        await stack.client.get_workflow_handle(cleanup_id(task_id)).terminate("test over")
