"""The operator's side: updates that answer at once, and search attributes the UI filters on."""

from __future__ import annotations

import httpx
import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from sas.task_models import OperatorAnswer, OperatorRequest, TaskState, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack


async def failed_and_waiting(stack: Stack, task_id: str) -> TaskStatus:
    handle = stack.client.get_workflow_handle(task_id)
    return await wait_until(
        lambda: handle.query("status", result_type=TaskStatus), lambda s: s.state == TaskState.FAILED, what="Failed"
    )


async def rejected(handle, update: str, request: OperatorRequest) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(WorkflowUpdateFailedError) as caught:
        await handle.execute_update(update, request, result_type=OperatorAnswer)
    return str(caught.value.cause)


async def test_updates_reject_with_reasons_and_accept_when_they_apply(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("upd")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    await stack.add_fault(endpoint="payment.charge", kind="latency", latency_ms=800, match_order_id=task_id)
    handle = await stack.submit(task_id)

    # While the steps run, nothing waits for a decision.
    await wait_until(
        lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Processing", what="charge running"
    )
    assert "no step is waiting for a decision" in await rejected(handle, "request_retry", OperatorRequest())

    await failed_and_waiting(stack, task_id)
    assert "unknown step 'pack'" in await rejected(handle, "request_retry", OperatorRequest(step="pack"))
    assert "step charge is Processed" in await rejected(handle, "request_retry", OperatorRequest(step="charge"))
    answer = await handle.execute_update(
        "request_retry", OperatorRequest(step="ship", by="alice"), result_type=OperatorAnswer
    )
    assert answer.accepted and answer.message == "retrying step ship"
    assert (await handle.result()).state == TaskState.PROCESSED

    # A finished workflow takes no updates; the client says so.
    with pytest.raises((RPCError, WorkflowUpdateFailedError)):
        await handle.execute_update("request_compensate", OperatorRequest(), result_type=OperatorAnswer)


async def test_compensate_update_then_compensating_is_rejected(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("upd-comp")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=task_id)
    # Slow undo, so the second request arrives while it runs.
    await stack.add_fault(endpoint="payment.refund", kind="latency", latency_ms=1000, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await failed_and_waiting(stack, task_id)

    answer = await handle.execute_update(
        "request_compensate", OperatorRequest(by="bob", reason="customer called"), result_type=OperatorAnswer
    )
    assert answer.accepted
    assert "the task is compensating" in await rejected(handle, "request_compensate", OperatorRequest())
    assert "no step is waiting" in await rejected(handle, "request_retry", OperatorRequest())
    assert (await handle.result()).state == TaskState.COMPENSATED
    status = await handle.query("status", result_type=TaskStatus)
    assert any("compensate requested by bob: customer called" in e for e in status.events)


async def test_search_attributes_find_exactly_the_right_workflows(stack_no_supervisor: Stack, ui_url: str) -> None:
    stack = stack_no_supervisor
    queue = stack.settings.temporal.task_queue
    done_id, stuck_id = fresh_id("sa-done"), fresh_id("sa-stuck")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=stuck_id)
    done = await stack.submit(done_id)
    await stack.submit(stuck_id)
    await done.result()
    await failed_and_waiting(stack, stuck_id)
    # Park it the way the Supervisor would, so it needs an operator.
    await stack.client.get_workflow_handle(stuck_id).signal(
        "park", OperatorRequest(step="ship", failure_count=3, by="test")
    )

    async def ui_query(query: str) -> list[str]:
        async with httpx.AsyncClient() as http:
            response = await http.get(
                f"{ui_url}/api/v1/namespaces/default/workflows", params={"query": f"TaskQueue = '{queue}' AND {query}"}
            )
            response.raise_for_status()
            return sorted(e["execution"]["workflowId"] for e in response.json().get("executions") or [])

    assert await wait_until(
        lambda: ui_query("SasNeedsOperator = true"),
        lambda ids: ids == [stuck_id],
        what="the UI filter for orders waiting for an operator",
    ) == [stuck_id]
    assert await ui_query("SasFailureCount >= 3") == [stuck_id]
    assert await ui_query("SasTaskState = 'Error' AND SasCurrentStep = 'ship'") == [stuck_id]
    assert await ui_query("SasTaskState = 'Processed'") == [done_id]
    assert await ui_query("SasNeedsOperator = false") == [done_id]


async def _upserts(stack: Stack, task_id: str) -> list[dict[str, object]]:
    """The search attributes each upsert of the task's history set, in order (decoded)."""
    from temporalio.converter import default as default_converter

    converter = default_converter().payload_converter
    upserts = []
    async for event in stack.client.get_workflow_handle(task_id).fetch_history_events():
        if event.HasField("upsert_workflow_search_attributes_event_attributes"):
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            upserts.append({name: converter.from_payloads([p])[0] for name, p in fields.items()})
    return upserts


async def test_a_task_on_its_happy_path_is_published_once_and_a_failure_at_once(stack_no_supervisor: Stack) -> None:
    """One upsert on the happy path, when the task ends (each is a history event and a
    visibility write); a task that needs a look is published when it does."""
    stack = stack_no_supervisor
    done_id, failing_id = fresh_id("sa-once"), fresh_id("sa-fail")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=failing_id)
    assert (await (await stack.submit(done_id)).result()).state == TaskState.PROCESSED
    assert await _upserts(stack, done_id) == [
        {"SasTaskState": "Processed", "SasCurrentStep": "ship", "SasFailureCount": 0, "SasNeedsOperator": False}
    ]

    await stack.submit(failing_id)
    await failed_and_waiting(stack, failing_id)
    published = await wait_until(lambda: _upserts(stack, failing_id), bool, what="the failure published")
    assert published[0]["SasTaskState"] == "Failed"  # found by the saved view "Waiting for a decision" at once
