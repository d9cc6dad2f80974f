"""The Scheduler's and the Supervisor's current details, as the UI reads them: through the
``__temporal_workflow_metadata`` query (issue 14)."""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

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
    # Its list entry in the UI says what it is (the summary it was started with).
    described = await stack.client.get_workflow_handle(supervisor_id).describe()
    summary = await described.static_summary()
    assert summary is not None and summary.startswith("Supervisor shard 1/1 · sweeps every")
    assert stack.settings.temporal.task_queue in summary
    assert "failure threshold" in (await described.static_details() or "")
    assert f"`{task_id}` charge: **retry**" in details
    # Each Agent call in the history carries its summary: the Supervisor's re-run is run 2.
    history = await handle.fetch_history()
    summaries = [
        pydantic_data_converter.payload_converter.from_payload(event.user_metadata.summary, str)
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes") and event.user_metadata.HasField("summary")
    ]
    assert summaries == [
        "reserve · run 1",
        "charge · run 1",
        "charge · run 2 · FailureCount 1",
        "ship · run 1",
    ]
    task_details = await current_details(stack.client, task_id)
    assert "**Task state: Processed**" in task_details and "**charge**: Processed · run 2" in task_details
    # The task's story, as the order type tells it: its line and what each step did.
    assert f"### order `{task_id}`" in task_details and "**What:** 2 × SKU-1 · 19.99 EUR" in task_details
    assert "Charged 19.99 EUR: ch" in task_details
