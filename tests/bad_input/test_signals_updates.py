"""Signals and updates with bad payloads, unknown steps, or a finished workflow.

A malformed update is rejected with the reason and changes nothing; a malformed signal
cannot break the workflow: the SDK drops it with a logged error, and a good signal after
it still completes the task. Unknown-step and finished-workflow *retry* updates are
covered in tests/e2e/test_operator.py; the wrong-step signal in test_temporal_cli.py."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from sas.task_models import OperatorAnswer, OperatorRequest, TaskState, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

MALFORMED: list[tuple[Any, str]] = [
    ({"step": 5}, "step"),
    ({"step": "ship", "colour": "red"}, "colour"),
    ({"failure_count": -1}, "failure_count"),
    ({"failure_count": "many"}, "failure_count"),
    ({"by": "x" * 500}, "by"),
    ("retry please", "OperatorRequest"),
    ([1, 2, 3], "OperatorRequest"),
]


async def waiting_for_a_decision(stack: Stack, faults: int = 2) -> WorkflowHandle[Any, Any]:
    task_id = fresh_id("bad-sig")
    # Two 503s use up the Agent's two quick attempts: ship Fails and waits (no Supervisor here).
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=faults, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED,
        what=f"{task_id} waiting for a decision",
    )
    return handle


def failure_chain(error: BaseException | None) -> str:
    parts = []
    while error is not None:
        parts.append(str(error))
        error = getattr(error, "cause", None)
    return " <- ".join(parts)


async def no_failed_workflow_task(handle: WorkflowHandle[Any, Any]) -> None:
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("workflow_task_failed_event_attributes")]


async def test_malformed_update_payloads_are_rejected_and_change_nothing(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    handle = await waiting_for_a_decision(stack)
    for update in ("request_retry", "request_compensate"):
        for payload, named in MALFORMED:
            with pytest.raises(WorkflowUpdateFailedError) as caught:
                await handle.execute_update(update, payload, result_type=OperatorAnswer)
            # The SDK rejects it before any handler runs: "Failed decoding arguments", caused by
            # pydantic's ValidationError, which names the field.
            assert named in failure_chain(caught.value.cause), (update, payload, failure_chain(caught.value.cause))
    status = await handle.query("status", result_type=TaskStatus)
    assert status.state == TaskState.FAILED and [s.state for s in status.steps] == ["Processed", "Processed", "Failed"]
    assert [s.runs for s in status.steps] == [1, 1, 1]  # nothing was retried or undone
    answer = await handle.execute_update("request_retry", OperatorRequest(by="alice"), result_type=OperatorAnswer)
    assert answer.accepted
    assert (await handle.result()).state == TaskState.PROCESSED
    assert [e["action"] for e in await stack.ledger(handle.id)] == ["reserve", "charge", "ship"]
    await no_failed_workflow_task(handle)


async def test_malformed_signals_are_rejected_visibly_and_a_good_one_still_works(
    stack_no_supervisor: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    stack = stack_no_supervisor
    handle = await waiting_for_a_decision(stack)
    caplog.set_level(logging.WARNING)
    for name in ("retry", "compensate", "park"):
        for payload, _ in MALFORMED:
            await handle.signal(name, payload)

    async def rejected() -> list[str]:
        status = await handle.query("status", result_type=TaskStatus)
        return [e for e in status.events if "signal rejected: invalid request" in e]

    # Each one is in the task's own events (sas status, the UI's query) and the worker's log.
    seen = await wait_until(
        rejected, lambda found: len(found) >= 3 * len(MALFORMED), what="every malformed signal to be rejected"
    )
    assert {e.split(" signal rejected")[0].split()[-1] for e in seen} == {"retry", "compensate", "park"}
    assert [r for r in caplog.records if "signal rejected" in r.getMessage()]
    status = await handle.query("status", result_type=TaskStatus)
    assert status.state == TaskState.FAILED and [s.runs for s in status.steps] == [1, 1, 1]
    await handle.signal("retry", {"by": "alice", "reason": "fixed"})
    assert (await handle.result()).state == TaskState.PROCESSED
    assert [e["action"] for e in await stack.ledger(handle.id)] == ["reserve", "charge", "ship"]
    assert await stack.step_states(handle.id) == {"reserve": "Processed", "charge": "Processed", "ship": "Processed"}
    await no_failed_workflow_task(handle)


async def test_compensate_update_naming_an_unknown_step_is_rejected(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    handle = await waiting_for_a_decision(stack)
    try:
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.execute_update("request_compensate", OperatorRequest(step="pakc"), result_type=OperatorAnswer)
        assert "unknown step 'pakc'" in str(caught.value.cause)
    finally:
        await handle.signal("retry", OperatorRequest(by="test"))
        await handle.result()


async def test_signals_and_updates_to_a_finished_workflow_are_refused_clearly(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    handle = await stack.submit(fresh_id("finished"))
    assert (await handle.result()).state == TaskState.PROCESSED
    for name in ("retry", "compensate", "park"):
        with pytest.raises(RPCError) as caught:
            await handle.signal(name, OperatorRequest(by="late"))
        assert caught.value.status == RPCStatusCode.NOT_FOUND and "already completed" in caught.value.message
    for update in ("request_retry", "request_compensate"):
        with pytest.raises(RPCError) as refused:
            await handle.execute_update(update, OperatorRequest(by="late"), result_type=OperatorAnswer)
        assert "already completed" in refused.value.message
    assert [e["action"] for e in await stack.ledger(handle.id)] == ["reserve", "charge", "ship"]
    assert await stack.task_state(handle.id) == "Processed"


NOT_JSON: list[tuple[Any, str]] = [
    ({"by": "alice", "failure_count": float("nan")}, "failure_count: NaN"),
    ({"reason": float("inf")}, "reason: Infinity"),
    ({"step": "ship", "by": [float("-inf")]}, "by[0]: -Infinity"),
]


async def test_a_non_finite_number_in_a_signal_is_refused_naming_the_field(stack_no_supervisor: Stack) -> None:
    """The workflow holds every signal it decodes to the strict JSON rule (sas.workflows.inputs):
    a NaN or an infinity, which pydantic's converter writes as the bare literal, is refused as not
    JSON, named, before any model reads it; the task goes on with the next good request."""
    stack = stack_no_supervisor
    handle = await waiting_for_a_decision(stack)
    for payload, _ in NOT_JSON:
        await handle.signal("retry", payload)

    async def rejected() -> list[str]:
        status = await handle.query("status", result_type=TaskStatus)
        return [e for e in status.events if "retry signal rejected: invalid request" in e]

    seen = await wait_until(rejected, lambda found: len(found) >= len(NOT_JSON), what="each signal to be rejected")
    for (_, named), event in zip(NOT_JSON, seen, strict=True):
        assert event.endswith(f"{named} is not a JSON number; give a finite number"), event
    for update in ("request_retry", "request_compensate"):
        for payload, _ in NOT_JSON:
            # An update is decoded by the SDK: its model refuses the number, naming the field.
            with pytest.raises(WorkflowUpdateFailedError) as caught:
                await handle.execute_update(update, payload, result_type=OperatorAnswer)
            assert "finite" in failure_chain(caught.value.cause) or "valid string" in failure_chain(caught.value.cause)
    status = await handle.query("status", result_type=TaskStatus)
    assert status.state == TaskState.FAILED and [s.runs for s in status.steps] == [1, 1, 1]
    await handle.signal("retry", {"by": "alice", "reason": "fixed"})
    assert (await handle.result()).state == TaskState.PROCESSED
    await no_failed_workflow_task(handle)
