"""What the UI says of a task, from the task workflow itself: a type's declared summary and
details, sas's neutral text for a type that declares none, and the story shown for a task
started with a plain Temporal client (no sas, so no static summary) - read as the UI reads it,
through the ``__temporal_workflow_metadata`` query, in the time-skipping environment."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sas.api import TaskResult, TaskState
from sas.api.testing import FakeAgents, fake_worker, time_skipping_environment
from sas.task_models.sdk_internals import workflow_name_of
from sas.workflows.scheduler import TaskScheduler
from sas_orders.models import OrderInput
from sas_orders.workflows import OrderWorkflow
from tests.ui.story_types import GiftWorkflow, LabelledWorkflow

ANSWERS: dict[str, Any] = {
    "inventory.reserve": {"reservation_id": "rsv_7", "sku": "BOOK-1", "quantity": 2},
    "payment.charge": {"charge_id": "ch_7", "amount_cents": 45_000},
    "shipping.ship": {"shipment_id": "shp_7"},
}
GIFT = {"sku": "BOOK-1", "quantity": 2, "amount_cents": 45_000}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def run_raw(env: WorkflowEnvironment, workflow: type[TaskScheduler], payload: dict[str, Any]) -> tuple[str, str]:
    """Start the task as ``temporal workflow start`` would - no summary, no details - run it to its
    end, and answer its workflow's current details and its static summary ("" if none)."""
    name = workflow_name_of(workflow)
    assert name is not None
    async with fake_worker(env, FakeAgents(answers=dict(ANSWERS)), workflow) as queue:
        handle: WorkflowHandle[Any, TaskResult] = await env.client.start_workflow(
            name, payload, id=f"story-{uuid.uuid4().hex[:10]}", task_queue=queue, result_type=TaskResult
        )
        assert (await handle.result()).state == TaskState.PROCESSED
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        summary = await (await handle.describe()).static_summary()
    return metadata.current_details, summary or ""


async def test_a_task_started_by_temporal_tells_its_types_story_from_the_workflow(env: WorkflowEnvironment) -> None:
    order = OrderInput(customer_id="cust-9", sku="BOOK-1", quantity=2, amount_cents=45_000, address="1 Lane")
    details, static_summary = await run_raw(env, OrderWorkflow, order.model_dump(mode="json"))
    assert static_summary == ""  # nobody but the workflow said anything
    # The order example's own summary and details, with its results: sas itself knows no amounts.
    assert "### order `story-" in details
    assert "**What:** 2 × BOOK-1 · 450.00 EUR" in details
    assert "Charged 450.00 EUR: ch\\_7" in details and "Shipped to the customer's address: shp\\_7" in details
    assert "**Task state: Processed**" in details
    assert "cust-9" not in details and "1 Lane" not in details


async def test_a_type_that_declares_nothing_gets_a_neutral_story_without_a_currency(env: WorkflowEnvironment) -> None:
    details, _ = await run_raw(env, GiftWorkflow, GIFT)
    assert "### gift `story-" in details and "**Steps:** reserve → charge" in details
    assert "**What:**" not in details
    assert "450" not in details and "EUR" not in details and "BOOK-1" not in details


async def test_a_declared_template_is_the_tasks_line(env: WorkflowEnvironment) -> None:
    details, _ = await run_raw(env, LabelledWorkflow, GIFT)
    assert "**What:** 2 of BOOK-1 as a gift" in details
