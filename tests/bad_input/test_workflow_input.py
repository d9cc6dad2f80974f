"""Workflow level: generated invalid input and ids started as OrderWorkflow/PreorderWorkflow
fail fast and non-retryably (InvalidInput) with the wrong field named, and leave nothing
behind; a payload over Temporal's blob limit is refused at the client; valid input full of
unicode and control characters goes through the whole stack unchanged."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from sas.task_models import TaskState, TaskStatus
from tests.bad_input.strategies import draw_examples, invalid_orders, invalid_task_ids
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


async def fails_with_invalid_input(stack: Stack, handle: WorkflowHandle[Any, Any], expected: str) -> str:
    """Assert the workflow failed at once, non-retryably, naming ``expected``, and left nothing behind."""
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError), cause
    assert cause.type == "InvalidInput" and cause.non_retryable, cause
    assert expected in cause.message, (expected, cause.message)
    history = await handle.fetch_history()
    # Refused in its first workflow task: no failed task to retry, no Agent, no mirror write.
    assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert not [e for e in history.events if e.HasField("marker_recorded_event_attributes")]  # local activities
    assert await stack.record(handle.id) is None
    assert await stack.ledger(handle.id) == []
    return cause.message


async def test_generated_invalid_payloads_fail_fast_naming_the_field(stack: Stack) -> None:
    cases = [("OrderWorkflow", *case) for case in draw_examples(invalid_orders(), 6)]
    cases += [("PreorderWorkflow", *case) for case in draw_examples(invalid_orders(preorder=True), 2)]
    handles = [await stack.submit(fresh_id("gen-bad"), payload, workflow=wf) for wf, payload, _, _ in cases]
    messages = await asyncio.gather(
        *(
            fails_with_invalid_input(stack, handle, field)
            for handle, (_, _, field, _) in zip(handles, cases, strict=False)
        )
    )
    for (workflow, _, _field, how), message in zip(cases, messages, strict=False):
        assert message.startswith(f"invalid {'preorder' if workflow == 'PreorderWorkflow' else 'order'} input"), message
        if how == "missing":
            assert "Field required" in message
        if how == "extra":
            assert "Extra inputs are not permitted" in message


async def test_invalid_task_ids_fail_fast_and_leave_nothing(stack: Stack) -> None:
    ids = draw_examples(invalid_task_ids(max_size=500).filter(bool), 5)
    ids += ["order\x00nul", "ordér-1", "order 1", "-order", "o" * 129, "order\u202e1"]
    handles = [await stack.submit(task_id) for task_id in ids]
    messages = await asyncio.gather(*(fails_with_invalid_input(stack, h, "invalid task id") for h in handles))
    assert all("1-128 characters" in m for m in messages)


async def test_an_empty_task_id_is_refused_at_the_client(stack: Stack) -> None:
    with pytest.raises(RPCError) as caught:
        await stack.client.start_workflow(
            "OrderWorkflow", order(), id="", task_queue=stack.settings.temporal.task_queue
        )
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT


async def test_a_payload_over_temporals_blob_limit_is_refused_at_the_client(stack: Stack) -> None:
    # Temporal refuses blobs over 2 MB (limit.blobSize.error): the start call itself fails,
    # so no workflow exists and there is nothing to clean up. Random text, because sas compresses
    # large payloads and a repeated letter would shrink under the limit.
    task_id = fresh_id("huge")
    address = base64.b64encode(os.urandom(3_000_000)).decode()
    payload = {"customer_id": "c", "sku": "S", "quantity": 1, "amount_cents": 5, "address": address}
    with pytest.raises(RPCError) as caught:
        await stack.submit(task_id, payload)
    assert caught.value.status == RPCStatusCode.INVALID_ARGUMENT
    assert "size exceeds limit" in caught.value.message.lower() or "blob" in caught.value.message.lower()
    with pytest.raises(RPCError) as missing:
        await stack.client.get_workflow_handle(task_id).describe()
    assert missing.value.status == RPCStatusCode.NOT_FOUND
    assert await stack.record(task_id) is None and await stack.ledger(task_id) == []


async def test_a_one_megabyte_payload_starts_then_fails_clearly(stack: Stack) -> None:
    # Under the blob limit, the server takes it and the workflow refuses it, without echoing it.
    handle = await stack.submit(fresh_id("big"), {**order().model_dump(), "address": "x" * 1_000_000})
    message = await fails_with_invalid_input(stack, handle, "address")
    assert "at most 500 characters" in message and len(message) < 1_000


async def test_unicode_goes_through_unchanged_and_control_characters_are_refused(stack: Stack) -> None:
    address = "Straße 1\u202e ☃ 東京 🚚\u200d\n2nd line"
    task_id = fresh_id("unicode")
    submitted = order(address=address, customer_id="c ~!@#$%^&*()_+{}|:<>?")
    result = await (await stack.submit(task_id, submitted)).result()
    assert result.state == TaskState.PROCESSED
    record = await stack.record(task_id)
    assert record is not None and record.task.payload["address"] == address
    assert record.task.payload["customer_id"] == submitted.customer_id
    ledger = await stack.ledger(task_id)
    assert [e["action"] for e in ledger] == ["reserve", "charge", "ship"]
    # NUL and terminal escapes would break PostgreSQL and the operator's terminal: refused, visibly.
    for bad in ("1 Main St\x00", "\x1b[31mred"):
        handle = await stack.submit(fresh_id("ctl"), {**order().model_dump(), "address": bad})
        assert "address: Value error, must not contain control characters" in await fails_with_invalid_input(
            stack, handle, "address"
        )


def _raw(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


WEDGES = {
    "deeply nested": (_raw(b"[" * 3000 + b"]" * 3000), "the payload cannot be decoded"),
    "not JSON": (_raw(b"{not json"), "cannot be decoded"),
    "a wrong object": (_raw(b'{"orders": [1, 2, 3]}'), "input"),
}


@pytest.mark.parametrize("workflow", ["OrderWorkflow", "PreorderWorkflow", "CleanupWorkflow", "SupervisorWorkflow"])
@pytest.mark.parametrize("wedge", list(WEDGES))
async def test_no_payload_wedges_a_workflow(stack: Stack, workflow: str, wedge: str) -> None:
    """Input the SDK could not even decode used to fail every workflow task: the workflow stayed
    Running for ever. Now every workflow type fails at once, non-retryably, saying why."""
    raw, expected = WEDGES[wedge]
    queue = stack.settings.temporal
    handle = await stack.client.start_workflow(
        workflow,
        raw,
        id=fresh_id("wedge"),
        task_queue=queue.supervisor_task_queue if workflow == "SupervisorWorkflow" else queue.task_queue,
    )
    await fails_with_invalid_input(stack, handle, expected)


async def test_an_undecodable_signal_is_rejected_visibly(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("sig")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", status=422, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", what="charge Failed")
    await handle.signal("retry", _raw(b"[" * 3000 + b"]" * 3000))
    await handle.signal("compensate", _raw(b'{"by": 5, "extra": true}'))

    async def events() -> list[str]:
        return (await handle.query("status", result_type=TaskStatus)).events

    seen = await wait_until(events, lambda e: sum("signal rejected" in x for x in e) == 2, what="both rejections")
    assert any("retry signal rejected: invalid request: the payload cannot be decoded" in e for e in seen)
    assert any("compensate signal rejected: invalid request: by: Input should be a valid string" in e for e in seen)
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Failed", "ship": "Pending"}
