"""The Scheduler's and the Supervisor's current details, as the UI reads them: through the
``__temporal_workflow_metadata`` query (issue 14)."""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from tests.helpers import fresh_id, wait_until
from tests.stack import Stack


async def current_details(client: Client, workflow_id: str) -> str:
    metadata = await client.get_workflow_handle(workflow_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )
    return metadata.current_details


async def test_the_supervisor_shows_its_last_sweep_and_decisions(stack: Stack) -> None:
    task_id = fresh_id("details")
    # The charge fails once, past the Agent's quick retries: the Supervisor decides a retry.
    await stack.add_fault(endpoint="payment.charge", kind="transient", times=2, match_order_id=task_id)
    handle = await stack.submit(task_id)
    assert (await handle.result()).state == "Processed"
    supervisor_id = stack.settings.supervisor.shard_workflow_id(0)
    details = await wait_until(
        lambda: current_details(stack.client, supervisor_id),
        lambda text: task_id in text,
        timeout=30,
        what="the Supervisor's current details to name the task",
    )
    assert "last sweep" in details and "steps due" in details
    assert f"`{task_id}` charge: **retry**" in details
    task_details = await current_details(stack.client, task_id)
    assert "**Task state: Processed**" in task_details and "**charge**: Processed · run 2" in task_details
