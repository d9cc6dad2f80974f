"""A compact call: once every worker reads compact plans, a task's own calls leave out the names
Temporal already gives their Agent's worker (the task id, its type, its chain and each step's
key), and the Agents, their seals and the services see the same calls as before.

On the real services and a real worker with compact plans (``SAS_WORKER__COMPACT_PLANS``); the
fast checks of the rule itself are in tests/runtime/test_whole_calls.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.client import Client

from sas.settings import WorkerSettings
from sas.task_models import StepCall, TaskState
from tests.conftest import ServiceProcess
from tests.helpers import fresh_id
from tests.stack import Stack, start_stack

FORWARD = ("inventory.reserve", "payment.charge", "shipping.ship")
UNDOS = ("shipping.cancel", "payment.refund", "inventory.release")


@pytest_asyncio.fixture
async def compact_stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, worker=WorkerSettings(compact_plans=True)
    ) as running:
        yield running


async def _calls(stack: Stack, task_id: str) -> dict[str, tuple[dict[str, Any], StepCall]]:
    """Each Agent's call as its history event holds it (the JSON sent, and read as a model)."""
    history = await stack.client.get_workflow_handle(task_id).fetch_history()
    found: dict[str, tuple[dict[str, Any], StepCall]] = {}
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            (payload,) = scheduled.input.payloads
            (call,) = await stack.client.data_converter.decode([payload], [StepCall])
            found[scheduled.activity_type.name] = (json.loads(payload.data), call)
    return found


async def test_an_undone_orders_calls_leave_out_what_temporal_gives_and_every_agent_runs_them(
    compact_stack: Stack,
) -> None:
    stack = compact_stack
    task_id = fresh_id("compact")
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
    )
    result = await (await stack.submit(task_id)).result()
    assert result.state == TaskState.COMPENSATED

    calls = await _calls(stack, task_id)
    assert set(calls) == {*FORWARD, *UNDOS}
    for name, (sent, call) in calls.items():
        assert not {"task_id", "task_type", "idempotency_key", "target_key"} & set(sent), name
        assert (call.task_id, call.idempotency_key) == ("", ""), name  # filled in by the Agent's worker
        assert "chain_id" not in sent["stamp"] and sent["seal"], name
    # Each Agent ran its call (its seal checked over the whole call) under the keys of before.
    ledger = await stack.ledger(task_id)
    assert [(e["action"], e["idempotency_key"], e["target_key"]) for e in ledger] == [
        ("reserve", f"{task_id}:reserve", None),
        ("charge", f"{task_id}:charge", None),
        ("refund", f"{task_id}:charge:undo", f"{task_id}:charge"),
        ("release", f"{task_id}:reserve:undo", f"{task_id}:reserve"),
    ]
    assert await stack.step_states(task_id) == {
        "reserve": "Compensated",
        "charge": "Compensated",
        "ship": "Compensated",
    }
    record = await stack.record(task_id)
    assert record is not None and record.task.state == TaskState.COMPENSATED
