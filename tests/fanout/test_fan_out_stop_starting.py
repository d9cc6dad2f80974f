"""A fan-out batch that is told to start no more items: once its task is being undone, a running
batch waits for the items under way and never calls the ones still waiting for their turn, so a
payroll undone mid-batch pays (and refunds) only what had begun. A batch told so by anyone else
(a signal from outside) does not make the step go on as if its items had been paid: they are
failures, and past the tolerance the task is undone."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from bench._payroll_service import Ledger
from sas.api.client import TaskClient
from sas.task_models import StepState, TaskResult, TaskState
from sas.task_models.fanout import STOP_STARTING
from tests.fanout.test_fan_out_e2e import payroll_type
from tests.fanout.test_fan_out_in_flight import held_payroll, held_stack, payments, people, refunds
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

pytestmark = pytest.mark.slow
__all__ = ["held_payroll", "held_stack", "payroll_type"]  # fixtures, used by name
NARROW = "PayrollNarrowWorkflow"
HISTORIES = Path(__file__).resolve().parents[1] / "histories"
# Two held at the service fill the batch's two slots; the six after them wait for a slot.
PAYLOAD = people("hang0", "hang1", "r2", "r3", "r4", "r5", "r6", "r7")


async def both_held(ledger: Ledger) -> None:
    async def holding() -> set[str]:
        return set(ledger.holding)

    await wait_until(holding, lambda now: now == {"hang0", "hang1"}, what="both slots held at the service")


async def signalled(handle: WorkflowHandle[Any, Any], event: EventType.ValueType) -> None:
    async def events() -> list[EventType.ValueType]:
        return [e.event_type async for e in handle.fetch_history_events()]

    await wait_until(events, lambda found: event in found, what=f"{EventType.Name(event)} in {handle.id}")


async def the_batch(client: Client, task_id: str) -> WorkflowHandle[Any, Any]:
    """The fan-out's one running batch, a child workflow of the task."""

    async def children() -> list[str]:
        query = f"ParentWorkflowId = '{task_id}' AND WorkflowType = 'FanOutBatch' AND ExecutionStatus = 'Running'"
        return [w.id async for w in client.list_workflows(query)]

    [batch_id] = await wait_until(children, lambda ids: len(ids) == 1, what="the running batch")
    return client.get_workflow_handle(batch_id)


async def both_held_in_one_batch(
    stack: Stack, ledger: Ledger, name: str
) -> tuple[WorkflowHandle[Any, TaskResult], WorkflowHandle[Any, Any]]:
    """A payroll whose one batch holds two calls at the service while six items wait for a slot:
    the task's handle and the batch's."""
    task_id = fresh_id(name)
    handle = await stack.submit(task_id, PAYLOAD, NARROW)
    await both_held(ledger)
    return handle, await the_batch(stack.client, task_id)


async def undone_mid_batch(stack: Stack, ledger: Ledger, name: str) -> tuple[TaskResult, str]:
    """A payroll compensated while its batch holds two calls and six items wait for a slot: its
    result, and the batch's workflow id."""
    handle, batch = await both_held_in_one_batch(stack, ledger, name)
    task_id = handle.id
    await TaskClient(stack.client, stack.settings).compensate(task_id, by="ops", reason="wrong run")
    # The task tells its batch to start no more items before anything more could land.
    await signalled(handle, EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED)
    ledger.released.set()
    return await handle.result(), batch.id


async def test_a_batch_undone_mid_way_never_calls_the_items_waiting_their_turn(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    result, _ = await undone_mid_batch(stack, ledger, "payroll-stop-starting")
    assert result.state == TaskState.COMPENSATED
    # The two under way were waited for, paid and refunded; the six waiting were never called.
    assert payments(ledger) == refunds(ledger) == Counter(["hang0", "hang1"])
    assert not [key for key in ledger.lookups if not key.endswith((":hang0", ":hang1"))]
    pay = result.steps[0]
    assert pay.state == StepState.COMPENSATED
    assert pay.result is not None and pay.result["not_started"] == 6 and pay.result["compensated"] == 2


async def cancelled_mid_batch(stack: Stack, ledger: Ledger, name: str) -> tuple[TaskResult, str]:
    """A payroll whose workflow is cancelled (`temporal workflow cancel`) while its batch holds
    two calls and six items wait for a slot: its result, and the batch's workflow id."""
    handle, batch = await both_held_in_one_batch(stack, ledger, name)
    await handle.cancel()
    # The batch is cancelled with the task: it starts nothing more.
    await wait_until(
        lambda: batch.describe(),
        lambda d: d.status == WorkflowExecutionStatus.CANCELED,
        what="the batch cancelled",
    )
    ledger.released.set()
    return await handle.result(), batch.id


async def test_a_task_cancelled_mid_batch_cancels_its_batch(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    result, _ = await cancelled_mid_batch(stack, ledger, "payroll-cancel-mid-batch")
    assert result.state == TaskState.COMPENSATED
    # The two held calls landed once let go, and were refunded; the six waiting never paid.
    assert payments(ledger) == refunds(ledger) == Counter(["hang0", "hang1"])


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
async def test_record_a_batch_told_to_stop_starting(
    held_stack: tuple[Stack, Ledger],
) -> None:
    """Histories for tests/replay: the task that told its batch, and the batch told; the task
    cancelled mid-batch, and its batch cancelled."""
    stack, ledger = held_stack
    for name, scenario in (("fan_out_stop_starting", undone_mid_batch), ("fan_out_cancelled", cancelled_mid_batch)):
        ledger.released.clear()
        result, batch_id = await scenario(stack, ledger, name.replace("_", "-"))
        for suffix, workflow_id in (("", result.task_id), ("_batch", batch_id)):
            history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
            text = json.dumps(json.loads(history.to_json()), indent=1) + "\n"
            (HISTORIES / f"{name}{suffix}.json").write_text(text)


async def test_a_batch_told_to_stop_from_outside_does_not_let_the_step_go_on_unpaid(
    held_stack: tuple[Stack, Ledger],
) -> None:
    stack, ledger = held_stack
    handle, batch = await both_held_in_one_batch(stack, ledger, "payroll-stop-forged")
    # Anyone with access to the namespace can send it: `temporal workflow signal`.
    await batch.signal(STOP_STARTING)
    await signalled(batch, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    ledger.released.set()
    result: TaskResult = await handle.result()
    # Six items never paid are six failures, more than the one tolerated: undone as a whole.
    assert result.state == TaskState.COMPENSATED
    pay = result.steps[0]
    assert pay.error_type == "FanOutPastTolerance"
    assert "not by this task" in (pay.last_error or "")
    assert payments(ledger) == refunds(ledger) == Counter(["hang0", "hang1"])
