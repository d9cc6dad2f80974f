"""The task client from a team's own service code (``sas.api.client.TaskClient``), not the CLI: it
starts a task, waits for it, parks, retries and compensates it, and the audit log names the
service (or the person it acts for) with the reason given. Real dev server, real services,
real state store."""

from __future__ import annotations

from typing import Any

import pytest

from sas.api import TaskState
from sas.api.client import ActionResult, InvalidInput, NotApplicable, Selection, TaskClient, TaskIdTaken, TaskNotFound
from sas.client.waiting import EXIT_NEEDS_OPERATOR
from sas.state_store.queries import audit_for
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


async def _audit(stack: Stack, task_id: str) -> list[Any]:
    async with stack.sessions() as session:
        return await audit_for(session, task_id)


async def _charge_failed(tasks: TaskClient, task_id: str, runs: int) -> None:
    def failed(view: Any) -> bool:
        charge = next((s for s in view.steps if s["name"] == "charge"), None)
        return charge is not None and charge["state"] == "Failed" and (charge["runs"] or 0) >= runs

    await wait_until(lambda: tasks.status(task_id), failed, what=f"{task_id}: charge Failed (run {runs})")


async def test_service_code_starts_waits_parks_retries_and_compensates_a_task(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="billing-service")
    task_id = fresh_id("client-order")
    # The card is refused every time: charge Fails and waits for a decision (no Supervisor here).
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)

    submitted = await tasks.submit("order", order(), task_id=task_id, priority=2)
    assert submitted.task_id == task_id and submitted.starts_at is None
    await _charge_failed(tasks, task_id, runs=1)

    parked = await tasks.park(task_id, reason="card blocked, asking the customer")
    assert isinstance(parked, ActionResult) and "parked" in parked.message
    outcome = await tasks.wait(task_id)
    assert (outcome.state, outcome.code) == ("Error", EXIT_NEEDS_OPERATOR)
    assert (await tasks.status(task_id)).needs_operator

    # A person in the team's tool acts through the service: the call names them.
    retried = await tasks.retry(task_id, by="alice@billing", reason="customer says the card works now")
    assert retried.task_id == task_id
    await _charge_failed(tasks, task_id, runs=2)

    await tasks.compensate(task_id, reason="card refused twice")
    result = await tasks.result(task_id)
    assert result.state == TaskState.COMPENSATED
    assert (await tasks.status(task_id)).state == "Compensated"

    entries = {e.action: e for e in await _audit(stack, task_id)}
    assert (entries["park"].actor, entries["park"].reason) == ("billing-service", "card blocked, asking the customer")
    assert (entries["retry"].actor, entries["retry"].reason) == ("alice@billing", "customer says the card works now")
    assert (entries["compensate"].actor, entries["compensate"].reason) == ("billing-service", "card refused twice")

    # The task has ended: what no longer applies is refused with a type, never a CLI error.
    with pytest.raises(NotApplicable, match="already finished"):
        await tasks.retry(task_id, reason="too late")


async def test_typed_errors_for_what_a_caller_can_act_on(stack: Stack) -> None:
    tasks = await TaskClient.connect(stack.settings, actor="orders-api")
    task_id = fresh_id("client-typed")

    with pytest.raises(InvalidInput) as bad:
        await tasks.submit("order", {**order().model_dump(mode="json"), "quantity": 0}, task_id=task_id)
    assert [loc for loc, _ in bad.value.problems] == [("quantity",)]
    with pytest.raises(InvalidInput, match="unknown task type"):
        await tasks.submit("no-such-type", {}, task_id=task_id)
    with pytest.raises(InvalidInput, match="priority"):
        await tasks.submit("order", order(), task_id=task_id, priority=9)
    with pytest.raises(InvalidInput, match="at most 200"):
        await tasks.retry(task_id, by="x" * 201)
    with pytest.raises(TaskNotFound):
        await tasks.status(task_id)

    # A dict input is validated by the type's model, as `sas submit --input FILE` is.
    await tasks.submit("order", order().model_dump(mode="json"), task_id=task_id)
    assert (await tasks.wait(task_id)).state == "Processed"
    with pytest.raises(TaskIdTaken) as taken:
        await tasks.submit("order", order(), task_id=task_id)
    assert taken.value.state == "Processed" and "a task id is one task" in taken.value.message


async def test_a_bulk_compensation_from_code_acts_on_exactly_the_selection(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="ops-bot")
    failing = [fresh_id("client-bulk") for _ in range(2)]
    for task_id in failing:
        await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
        await tasks.submit("order", order(), task_id=task_id)
    for task_id in failing:
        await _charge_failed(tasks, task_id, runs=1)
    fine = (await tasks.submit("order", order())).task_id
    assert (await tasks.wait(fine)).state == "Processed"

    selection = Selection(limit=10, task_states=("Failed",), step="charge")
    assert sorted(t.task_id for t in (await tasks.select(selection)).tasks) == sorted(failing)
    with pytest.raises(InvalidInput, match="every task"):
        await tasks.select(Selection(limit=10))

    done = await tasks.bulk("compensate", selection, reason="card processor refuses everything")
    assert sorted((r.task_id, r.outcome) for r in done.results) == sorted((t, "ok") for t in failing)
    for task_id in failing:
        assert (await tasks.result(task_id)).state == TaskState.COMPENSATED
        [entry] = [e for e in await _audit(stack, task_id) if e.action == "compensate"]
        assert entry.actor == "ops-bot"
        assert entry.reason == f"card processor refuses everything (bulk {done.bulk_id})"


async def test_a_park_is_confirmed_even_when_the_step_moves_on_at_once(stack_no_supervisor: Stack) -> None:
    """A park waits for the Scheduler to apply it. The Error row is not all it can look for: a
    service that compensates what waits for an operator (docs/api.md) moves the step on before
    the next look. The park's audit entry, written after the Error row, stays."""
    import asyncio

    from temporalio.api.enums.v1 import EventType

    from sas.task_models import OperatorRequest

    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="billing-service")
    task_id = fresh_id("client-park-moved-on")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    await tasks.submit("order", order(), task_id=task_id)
    await _charge_failed(tasks, task_id, runs=1)
    handle = stack.client.get_workflow_handle(task_id)

    async def park_signalled() -> bool:
        history = await handle.fetch_history()
        return any(
            e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and e.workflow_execution_signaled_event_attributes.signal_name == "park"
            for e in history.events
        )

    parking: asyncio.Future[ActionResult] = asyncio.ensure_future(
        tasks.park(task_id, reason="card blocked", confirm_within_s=60)
    )
    await wait_until(park_signalled, what="the park signal in the task's history")
    # Right behind it, the compensate a service sends once it sees Error.
    await handle.signal("compensate", OperatorRequest(by="support@shop", reason="the customer gave up waiting"))

    parked = await parking
    assert "parked" in parked.message
    assert (await tasks.result(task_id)).state == TaskState.COMPENSATED
    entries = {e.action: e for e in await _audit(stack, task_id)}
    assert (entries["park"].actor, entries["park"].reason) == ("billing-service", "card blocked")
    assert entries["compensate"].actor == "support@shop"
