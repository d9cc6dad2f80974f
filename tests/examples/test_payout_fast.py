"""The payout in Temporal's time-skipping environment, with fake Agents - through sas.api's test
helpers, as a team would test its own task type: each recipient paid under their own key, then
the notices sent by the child task; and, with the bank itself run for real beside the fakes,
blocked payees within the tolerance left unpaid while the rest are paid, past it every payment
reversed."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest_asyncio
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from sas.api import StepCall, TaskResult, TaskState
from sas.api.testing import FakeAgents, fake_worker, run_task, time_skipping_environment
from sas_payout.notice import PayoutNoticeWorkflow
from sas_payout.services import Ledger, create_app
from sas_payout.workflows import PayoutWorkflow
from tests.helpers import fresh_id, serving


def payout(count: int, blocked: int = 0) -> dict[str, Any]:
    """``count`` recipients, 10.00 EUR and a cent more each; the first ``blocked`` are refused by the bank."""
    ids = [f"blocked-{n}" if n < blocked else f"emp-{n}" for n in range(count)]
    return {
        "currency": "EUR",
        "recipients": [{"payee_id": who, "amount_cents": 1_000 + n} for n, who in enumerate(ids)],
    }


def paid(call: StepCall) -> dict[str, Any]:
    return {"payment_id": f"pm_{call.item_key}", "amount_cents": call.payload["amount_cents"]}


def answers() -> dict[str, Any]:
    return {
        "payout_runs.validate": lambda call: {"run_id": call.task_id, "recipients": 3, "total_cents": 3_003},
        "payout_bank.pay": paid,
        "payout_notices.send": {"notice_id": "nt_1", "sent": 3},
    }


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


@pytest_asyncio.fixture
async def bank() -> AsyncIterator[tuple[str, Ledger]]:
    """The payout's own services, in this process: the bank's Agents run against them for real."""
    ledger = Ledger()
    async with serving(create_app(ledger), "the payout services") as url:
        yield url, ledger


async def with_notice(
    env: WorkflowEnvironment, payload: dict[str, Any], agents: FakeAgents, task_id: str
) -> tuple[TaskResult, str]:
    """Run a payout to its end with its child type on the same worker (``run_task`` runs one
    workflow type); its result and its workflow's current details, as the UI reads them."""
    async with fake_worker(env, agents, PayoutWorkflow, PayoutNoticeWorkflow) as queue:
        handle = await env.client.start_workflow(
            "PayoutWorkflow", payload, id=task_id, task_queue=queue, result_type=TaskResult
        )
        result = await handle.result()
        metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return result, metadata.current_details


async def test_each_recipient_is_paid_under_their_own_key_then_the_notices_are_sent(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers())
    task_id = f"payout-fast-{uuid.uuid4().hex[:8]}"
    result, details = await with_notice(env, payout(3), agents, task_id)
    assert result.state == TaskState.PROCESSED
    keys = [key for name, key in agents.effects if name == "payout_bank.pay"]
    assert sorted(keys) == [f"{task_id}:pay:emp-{n}" for n in range(3)]
    # Each item's call carries the payout's currency, the run and its own amount.
    bodies = sorted((b for name, b in agents.bodies if name == "payout_bank.pay"), key=lambda b: b["amount_cents"])
    assert bodies[0] == {"run_id": task_id, "amount_cents": 1_000, "currency": "EUR"}
    # The child task sent the notices of the run the bank validated, under its own id.
    send = next(call for name, call in agents.calls if name == "payout_notices.send")
    assert send.task_id == f"{task_id}:notice"
    assert (send.payload["run_id"], send.payload["channel"]) == (task_id, "email")
    steps = {s.name: s for s in result.steps}
    assert steps["pay"].result == {"items": 3, "tolerance": 0, "failed_items": 0, "tolerated": 0, "processed": 3}
    assert steps["notice"].result == {"child_task_id": f"{task_id}:notice", "state": "Processed"}
    # The type's own line and story, in the workflow's current details.
    assert "payout 3 recipients, 30.03 EUR" in details and "Paid 3 of 3 recipients" in details
    assert "Notices sent by email" in details


async def test_blocked_payees_within_the_tolerance_are_left_unpaid_and_the_rest_paid(
    env: WorkflowEnvironment, bank: tuple[str, Ledger]
) -> None:
    url, ledger = bank
    agents = FakeAgents(answers=answers(), services={"payout_bank": url})
    task_id = fresh_id("payout-fast-blocked")
    result, _ = await with_notice(env, payout(20, blocked=2), agents, task_id)
    assert result.state == TaskState.PROCESSED
    pay = next(s for s in result.steps if s.name == "pay")
    assert pay.result == {
        "items": 20,
        "tolerance": 2,
        "failed_items": 2,
        "tolerated": 2,
        "processed": 18,
        "compensated": 2,
    }
    # The bank paid each other payee once; the blocked ones were never paid, so nothing was reversed.
    actions = Counter((e["action"], e["payee_id"]) for e in ledger.effects)
    assert actions == Counter({("payout_bank.pay", f"emp-{n}"): 1 for n in range(2, 20)})
    assert not [c for c in ledger.calls if c["action"] == "payout_bank.reverse"]  # no DELETE ever reached it
    assert "payout_notices.send" in agents.done()


async def test_blocked_payees_past_the_tolerance_reverse_every_payment(
    env: WorkflowEnvironment, bank: tuple[str, Ledger]
) -> None:
    url, ledger = bank
    agents = FakeAgents(answers=answers(), services={"payout_bank": url})
    task_id = fresh_id("payout-fast-past")
    # Past the tolerance the notice step is never reached: run_task's one workflow type will do.
    result = await run_task(env, PayoutWorkflow, payout(20, blocked=3), agents, task_id=task_id)
    assert result.state == TaskState.COMPENSATED
    assert {s.name: s.state for s in result.steps} == {
        "validate": "Compensated",
        "pay": "Compensated",
        "notice": "Skipped",
    }
    paid_to = Counter(e["payee_id"] for e in ledger.effects if e["action"] == "payout_bank.pay")
    reversed_for = Counter(e["payee_id"] for e in ledger.effects if e["action"] == "payout_bank.reverse")
    assert paid_to == reversed_for and set(paid_to.values()) == {1}
    assert not any(who.startswith("blocked-") for who in paid_to)
    assert agents.undone() == ["payout_runs.close"] and "payout_notices.send" not in agents.done()
    async with httpx.AsyncClient() as http:  # the ledger's own view of the run nets to nothing paid
        entries = (await http.get(f"{url}/ledger", params={"run": task_id})).json()["entries"]
    assert len(entries) == 2 * sum(paid_to.values())
