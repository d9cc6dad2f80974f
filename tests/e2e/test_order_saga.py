"""The order saga end to end: real Temporal, real remote services, real state store."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sas.task_models import TaskState, TaskStatus
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


def effects(ledger: list[dict], action: str) -> list[dict]:
    return [e for e in ledger if e["action"] == action]


async def test_happy_path_is_mirrored_step_by_step(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("happy")
    handle = await stack.submit(task_id)
    result = await handle.result()

    assert result.state == TaskState.PROCESSED
    # Each Agent writes its own rows; on a machine so loaded that the state store does not answer
    # within the attempt's time, an Agent goes on without its row and the Supervisor's
    # reconciliation writes it from Temporal later (docs/reliability.md): wait for that, bounded.
    mirrored = [("reserve", 0, "Processed"), ("charge", 1, "Processed"), ("ship", 2, "Processed")]

    async def rows() -> Any:
        found = await stack.record(task_id)
        return found and (found.task.state, [(s.name, s.position, s.state) for s in found.steps])

    await wait_until(rows, lambda r: r == ("Processed", mirrored), timeout=120, what="every row Processed")
    record = await stack.record(task_id)
    assert record is not None
    for step in record.steps:
        assert step.idempotency_key == f"{task_id}:{step.name}"
        assert step.attempt == 1 and step.failure_count == 0
        assert step.locked_by is None and step.complete_by is None
    ledger = await stack.ledger(task_id)
    assert [(e["service"], e["action"]) for e in ledger] == [
        ("inventory", "reserve"),
        ("payment", "charge"),
        ("shipping", "ship"),
    ]
    status = await handle.query("status", result_type=TaskStatus)
    assert status.state == TaskState.PROCESSED and [s.state for s in status.steps] == ["Processed"] * 3


async def test_agent_records_processing_with_lockedby_and_completeby(stack: Stack) -> None:
    task_id = fresh_id("inflight")
    await stack.add_fault(endpoint="payment.charge", kind="latency", latency_ms=1200, match_order_id=task_id)
    handle = await stack.submit(task_id)

    async def charge_row():
        record = await stack.record(task_id)
        return None if record is None else record.steps[1]

    row = await wait_until(charge_row, lambda r: r is not None and r.state == "Processing", what="charge Processing")
    assert row.locked_by == "test-worker"
    assert row.complete_by is not None and row.attempt == 1
    assert (await stack.record(task_id)).task.current_step == "charge"  # type: ignore[union-attr]
    assert (await handle.result()).state == TaskState.PROCESSED


async def test_transient_fault_is_retried_with_the_same_key_and_one_effect(stack: Stack) -> None:
    task_id = fresh_id("transient")
    # The charge goes through but its answer is lost, then the service fails once more.
    await stack.add_fault(endpoint="payment.charge", kind="lost_response", times=1, match_order_id=task_id)
    handle = await stack.submit(task_id)
    assert (await handle.result()).state == TaskState.PROCESSED

    charges = effects(await stack.ledger(task_id), "charge")
    assert len(charges) == 1
    assert charges[0]["idempotency_key"] == f"{task_id}:charge"
    record = await stack.record(task_id)
    assert record is not None and record.steps[1].attempt == 2


async def test_permanent_fault_compensates_completed_steps_and_alerts(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("declined")
    await stack.add_fault(
        endpoint="shipping.ship",
        kind="permanent",
        status=422,
        error="address_rejected",
        message="no such street",
        match_order_id=task_id,
    )
    handle = await stack.submit(task_id)
    result = await handle.result()

    assert result.state == TaskState.COMPENSATED
    ledger = await stack.ledger(task_id)
    assert len(effects(ledger, "charge")) == 1 and len(effects(ledger, "refund")) == 1
    assert len(effects(ledger, "reserve")) == 1 and len(effects(ledger, "release")) == 1
    assert effects(ledger, "refund")[0]["target_key"] == f"{task_id}:charge"
    assert not effects(ledger, "ship")
    assert await stack.step_states(task_id) == {
        "reserve": "Compensated",
        "charge": "Compensated",
        "ship": "Compensated",
    }
    assert await stack.task_state(task_id) == "Compensated"
    alerts = await stack.alerts(task_id)
    # Open, or already resolved by a sweep once the task was compensated.
    assert [(a.kind, a.step) for a in alerts] == [("permanent_failure", "ship")]
    assert "no such street" in (alerts[0].last_error or "")
    decisions = await stack.decisions(task_id)
    assert [(d.kind, d.step, d.failure_count) for d in decisions] == [("compensate", "ship", 1)]


async def test_card_declined_undoes_only_the_reservation(stack: Stack) -> None:
    task_id = fresh_id("card")
    handle = await stack.submit(task_id, order(card="4000000000000002"))
    assert (await handle.result()).state == TaskState.COMPENSATED
    ledger = await stack.ledger(task_id)
    assert [e["action"] for e in ledger] == ["reserve", "release"]
    assert await stack.step_states(task_id) == {"reserve": "Compensated", "charge": "Compensated", "ship": "Skipped"}


async def test_hanging_service_misses_complete_by_then_supervisor_retries_then_threshold(stack: Stack) -> None:
    task_id = fresh_id("hang")
    await stack.add_fault(endpoint="shipping.ship", kind="hang", hang_s=60, match_order_id=task_id)
    handle = await stack.submit(task_id)
    result = await handle.result()

    assert result.state == TaskState.COMPENSATED
    decisions = await stack.decisions(task_id)
    kinds = [(d.kind, d.failure_count) for d in decisions if d.step == "ship"]
    # FailureCount 1 and 2: retry; at the threshold (3): compensate.
    assert [k for k, _ in kinds][-1] == "compensate"
    assert ("retry", 1) in kinds and ("retry", 2) in kinds and ("compensate", 3) in kinds
    ship = next(s for s in result.steps if s.name == "ship")
    assert ship.error_type is not None and ship.error_type.startswith("Timeout:")
    ledger = await stack.ledger(task_id)
    assert not effects(ledger, "ship")
    assert len(effects(ledger, "refund")) == 1 and len(effects(ledger, "release")) == 1
    alerts = await stack.alerts(task_id)
    assert [(a.kind, a.failure_count) for a in alerts] == [("failure_threshold", 3)]


async def test_duplicate_submission_runs_once(stack_no_supervisor: Stack) -> None:
    """``sas submit`` of an id already taken, while the task runs and after it ended, starts nothing."""
    stack = stack_no_supervisor
    task_id = fresh_id("dup")
    # The charge fails until the fault is lifted, and with no Supervisor the order waits for an
    # operator: the first duplicate surely meets it running.
    charge_down = await stack.add_fault(endpoint="payment.charge", kind="transient", match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", what="charge Failed")
    running = await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id)
    assert running.returncode == 1, running.stdout + running.stderr
    assert f"task {task_id} is already running" in running.stderr, running.stderr
    await stack.remove_fault(charge_down)
    assert (await sas(stack, "retry", task_id, "--reason", "payment back")).returncode == 0
    assert (await handle.result()).state == TaskState.PROCESSED
    finished = await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id)
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert f"task {task_id} already exists and is Processed" in finished.stderr, finished.stderr

    # One run in Temporal, one effect per step, and the mirror still holds the first run's task.
    async def runs() -> list[str | None]:
        return [w.run_id async for w in stack.client.list_workflows(f"WorkflowId = '{task_id}'")]

    # Visibility lags a little behind the history: wait for the closed run to show, then count.
    assert await wait_until(runs, what="the run in visibility") == [handle.result_run_id]
    ledger = await stack.ledger(task_id)
    assert [(e["action"], e["idempotency_key"]) for e in ledger] == [
        ("reserve", f"{task_id}:reserve"),
        ("charge", f"{task_id}:charge"),
        ("ship", f"{task_id}:ship"),
    ]
    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Processed"


@pytest.mark.parametrize(
    "payload, message",
    [
        ({"customer_id": "c", "sku": "S", "quantity": -1, "amount_cents": 5, "address": "x"}, "quantity"),
        ({"customer_id": "c", "sku": "S", "quantity": 1, "amount_cents": "lots", "address": "x"}, "amount_cents"),
        ({"customer_id": "c", "sku": "S", "quantity": 1, "amount_cents": 5}, "address"),
        ("not an object", "must be a JSON object"),
    ],
)
async def test_invalid_input_fails_fast_and_non_retryably(stack: Stack, payload, message) -> None:
    task_id = fresh_id("bad")
    handle = await stack.submit(task_id, payload)
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "InvalidInput" and cause.non_retryable
    assert message in cause.message
    assert await stack.record(task_id) is None  # nothing accepted, nothing called
    assert await stack.ledger(task_id) == []


@pytest.mark.parametrize(
    "latency_ms, shipped",
    # Past it by 4 s: the attempt gives up on its answer, but the service still serves the call
    # it holds, and the undo's lookup waits for it (the in-flight rule), so it is undone too.
    [(1_000, ["ship", "cancel"]), (6_000, ["ship", "cancel"])],
    ids=["answered", "past-complete-by"],
)
async def test_a_workflow_cancelled_while_ship_is_served_is_undone_once_the_attempt_has_ended(
    stack: Stack, latency_ms: int, shipped: list[str]
) -> None:
    """Cancelling the workflow (UI, CLI) while ship's call is at the service: the attempt is
    cancelled and waited for, then everything is undone, and the cancellation is never lost in
    the wait. Answered within its complete-by, the shipment is made, then cancelled; past it,
    the service still makes it, and the undo's lookup, which waits for a request still being
    served under its key, names it, so it is cancelled all the same: nothing is left behind."""
    task_id = fresh_id("cancel-mid-ship")
    await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=latency_ms, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship running")
    await handle.cancel()
    result = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert [s.state for s in result.steps] == ["Compensated"] * 3
    ledger = await stack.ledger(task_id)
    assert [e["action"] for e in ledger if e["service"] == "shipping"] == shipped
