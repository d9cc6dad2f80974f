"""One fan-out item completed from outside (`temporal activity complete` on the batch's pending
payment, with a result of the caller's own): the item is not counted as paid on that word. It
is weighed as a failure whose outcome is unknown, and undone with its lookup deciding, so the
payroll's counts and its ledger agree: the late payment is refunded, not left standing."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from temporalio.client import Client

from bench._payroll_service import Ledger, payroll_service
from sas.state_store.queries import audit_for
from sas.task_models import TaskResult, TaskState
from tests.e2e.test_temporal_cli import temporal_cli
from tests.fanout.test_fan_out_e2e import payroll, payroll_stack, payroll_type, recipients  # noqa: F401 - fixtures
from tests.helpers import fresh_id, serving, wait_until


async def pending_payment(client: Client, task_id: str) -> tuple[str, str] | None:
    """The batch workflow and activity id of hang0's payment, once Temporal runs it."""
    async for listed in client.list_workflows(f"WorkflowId STARTS_WITH '{task_id}:'"):
        batch = client.get_workflow_handle(listed.id)
        pending = {a.activity_id for a in (await batch.describe()).raw_description.pending_activities}
        async for event in batch.fetch_history_events():
            scheduled = event.activity_task_scheduled_event_attributes
            if (
                event.HasField("activity_task_scheduled_event_attributes")
                and scheduled.activity_id in pending
                and any(b'"hang0"' in p.data for p in scheduled.input.payloads)
            ):
                return listed.id, scheduled.activity_id
    return None


async def test_an_item_completed_from_outside_is_not_counted_paid_and_is_undone_by_its_lookup(
    payroll_type: None,  # noqa: F811
    payroll: tuple[str, Ledger],  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    payload = recipients(10)
    payload["recipients"][3]["id"] = "hang0"
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        try:
            task_id = fresh_id("payroll-forged")
            handle = await stack.submit(task_id, payload, "PayrollRunWorkflow")
            await wait_until(lambda: _holding(ledger), bool, what="hang0's payment held at the service")
            found = await wait_until(
                lambda: pending_payment(stack.client, task_id), lambda found: found is not None, what="hang0 pending"
            )
            assert found is not None
            batch, activity_id = found
            forged = {"data": {"payment_id": "pay_forged"}}
            done = await temporal_cli(
                stack.settings.temporal.address,
                *("activity", "complete", "--workflow-id", batch, "--activity-id", activity_id),
                *("--result", json.dumps(forged)),
            )
            assert done.returncode == 0, done.stderr
            ledger.released.set()  # the real payment lands late, after the forger's word
            result = await _ended(stack.client, task_id, handle)
            alerts = [a for a in await stack.alerts(task_id) if a.kind == "foreign_result"]
            async with stack.sessions() as session:
                refused = [a for a in await audit_for(session, task_id) if a.action == "refuse result"]
        finally:
            # Before the worker stops: its shutdown waits for hang0's held call to end.
            ledger.released.set()

    assert result.state == TaskState.PROCESSED
    pay = next(s for s in result.steps if s.name == "pay")
    assert pay.result is not None
    assert pay.result["processed"] == 9 and pay.result["compensated"] == 1, pay.result
    # What the bank did agrees with the counts: hang0 was paid late, and that payment refunded.
    assert ("pay", "hang0") in ledger.entries and ("refund", "hang0") in ledger.entries, ledger.entries
    assert [who for action, who in ledger.entries if action == "refund"] == ["hang0"]
    # Seen and said: an audit entry and a critical alert name the item and what was claimed.
    [entry] = refused
    assert entry.step == "pay" and "pay_forged" in entry.changed and "payroll.pay" in entry.changed
    [alert] = alerts
    assert alert.severity == "critical" and "pay_forged" in alert.message


async def _holding(ledger: Ledger) -> bool:
    return "hang0" in ledger.holding


class HoldFirstRefund:
    """The payroll service with its first refund held at the door until released: an undo
    whose answer has not come when someone completes it from outside. ``held_key``: that
    request's idempotency key, which names the undo's activity (its input carries it)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.held_key = ""
        self._first = True

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/payroll/refund" and self._first:
            self._first = False
            self.held_key = dict(scope["headers"]).get(b"idempotency-key", b"").decode()
            self.holding.set()
            await self.release.wait()
        await self.app(scope, receive, send)


async def pending_refund(client: Client, task_id: str, key: str) -> tuple[str, str] | None:
    """The undo batch and activity id of the refund under idempotency ``key`` (the one held at
    the service), once Temporal runs it. The batch's other refunds are answered at once: one of
    those, taken instead, would be over before it could be completed from outside."""
    async for listed in client.list_workflows(f"WorkflowId STARTS_WITH '{task_id}:'"):
        if ":undo-" not in listed.id:
            continue
        batch = client.get_workflow_handle(listed.id)
        pending = {
            a.activity_id
            for a in (await batch.describe()).raw_description.pending_activities
            if a.activity_type.name == "payroll.refund"
        }
        async for event in batch.fetch_history_events():
            scheduled = event.activity_task_scheduled_event_attributes
            if (
                event.HasField("activity_task_scheduled_event_attributes")
                and scheduled.activity_id in pending
                and any(f'"idempotency_key":"{key}"'.encode() in p.data for p in scheduled.input.payloads)
            ):
                return listed.id, scheduled.activity_id
    return None


async def test_an_item_s_undo_completed_from_outside_does_not_end_the_task_compensated_with_a_payment_standing(
    payroll_type: None,  # noqa: F811
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    ledger = Ledger()
    held = HoldFirstRefund(payroll_service(ledger))
    payload = recipients(10, refused=5)  # past its tolerance of 3: every payment made is refunded
    async with (
        serving(held, "the payroll service") as url,
        payroll_stack(url, client, temporal_address, services, sqlite_url) as stack,
    ):
        try:
            task_id = fresh_id("payroll-forged-undo")
            handle = await stack.submit(task_id, payload, "PayrollRunWorkflow")
            await wait_until(lambda: _set(held.holding), bool, what="a refund held at the service")
            assert held.held_key, "the refund came with no idempotency key"
            found = await wait_until(
                lambda: pending_refund(stack.client, task_id, held.held_key),
                lambda f: f is not None,
                what="the held refund pending",
            )
            assert found is not None
            batch, activity_id = found
            done = await temporal_cli(
                stack.settings.temporal.address,
                *("activity", "complete", "--workflow-id", batch, "--activity-id", activity_id),
                *("--result", json.dumps({"data": {"refunded": True}})),
            )
            assert done.returncode == 0, done.stderr
            result = await _ended(stack.client, task_id, handle)
            paid = Counter(who for action, who in ledger.entries if action == "pay")
            refunded = Counter(who for action, who in ledger.entries if action == "refund")
        finally:
            # Before the worker stops: its shutdown waits for the held refund's call to end.
            held.release.set()
    assert result.state == TaskState.COMPENSATED
    # Undone as a whole, for real: every payment made was refunded before the task said so.
    assert paid == refunded and set(paid.values()) == {1}, (paid, refunded)


async def _set(event: asyncio.Event) -> bool:
    return event.is_set()


async def _ended(client: Client, task_id: str, handle: Any) -> TaskResult:
    """The task's result within 120 s (it takes a few); past that, a failure that says what each of
    its workflows still waits for, rather than a test that waits until its worker is killed."""
    try:
        result: TaskResult = await asyncio.wait_for(handle.result(), timeout=120)
        return result
    except TimeoutError:
        waiting = []
        async for listed in client.list_workflows(f"WorkflowId STARTS_WITH '{task_id}'"):
            described = (await client.get_workflow_handle(listed.id).describe()).raw_description
            activities = [(a.activity_type.name, a.state, a.attempt) for a in described.pending_activities]
            children = [c.workflow_id for c in described.pending_children]
            waiting.append(f"{listed.id} {listed.status}: activities {activities}, children {children}")
        raise AssertionError("the task did not end in 120 s:\n" + "\n".join(waiting)) from None
