"""The payout example end to end, as a team would run it: the package installed with pip (its
``sas.task_types`` entry points, ``payout`` and its child type ``payout_notice``), its own
services (``sas-payout-services``), and sas's worker and Supervisor as processes on a real
Temporal dev server, driven with ``sas submit --type payout``. What it must show, from the
services' ledger: every payee paid once and the notice sent; blocked payees within the
tolerance never paid and never reversed while the rest are paid; past it, every payment made
reversed; the notices refused for good, every payment reversed; a run that fails validation
undone with nothing paid."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client

from tests.examples.example_stack import ExampleStack, example_stack
from tests.helpers import fresh_id

# One stack (services, worker, Supervisor) for the module: its tests stay on one xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("payout_example")]


class PayoutStack(ExampleStack):
    async def submit(self, task_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await self.submit_as("payout", task_id, payload)

    async def ledger(self, run: str) -> list[dict[str, Any]]:
        """The effects of the run, its child's notices with them."""
        return await self.entries(run=run)


@pytest_asyncio.fixture(scope="module")
async def payouts(
    client: Client, temporal_address: str, payout_services: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[PayoutStack]:
    async with example_stack(
        PayoutStack,
        client,
        temporal_address,
        payout_services,
        tmp_path_factory.mktemp("payout"),
        services=("payout_runs", "payout_bank", "payout_notices"),
    ) as stack:
        yield stack


def payout(count: int, blocked: int = 0, **fields: Any) -> dict[str, Any]:
    """``count`` recipients, 10.00 EUR and a cent more each; the first ``blocked`` are refused by the bank."""
    ids = [f"blocked-{n}" if n < blocked else f"emp-{n}" for n in range(count)]
    recipients = [{"payee_id": who, "amount_cents": 1_000 + n} for n, who in enumerate(ids)]
    return {"currency": "EUR", "recipients": recipients, **fields}


def count(entries: list[dict[str, Any]], action: str) -> Counter[str]:
    """How many times the services did ``action``, by payee (by action, for the run's own)."""
    return Counter(e.get("payee_id", action) for e in entries if e["action"] == action)


async def test_every_payee_is_paid_once_then_the_notice_is_sent(payouts: PayoutStack) -> None:
    task_id = fresh_id("payout")
    result = await payouts.submit(task_id, payout(12))
    assert result["state"] == "Processed"
    ledger = await payouts.ledger(task_id)
    assert count(ledger, "payout_bank.pay") == Counter(f"emp-{n}" for n in range(12))
    assert count(ledger, "payout_runs.validate") == Counter({"payout_runs.validate": 1})
    notices = [e for e in ledger if e["action"] == "payout_notices.send"]
    assert len(notices) == 1 and notices[0]["sent"] == 12 and notices[0]["key"] == f"{task_id}:notice:send"
    assert not [e for e in ledger if e["action"] in ("payout_bank.reverse", "payout_runs.close")]
    assert await payouts.mirror(task_id) == {"validate": "Processed", "pay": "Processed", "notice": "Processed"}
    children = (await payouts.show(task_id))["children"]
    assert children == [
        {"task_id": f"{task_id}:notice", "step": "notice", "task_type": "payout_notice", "state": "Processed"}
    ]
    # The UI's list shows the type's own line: how many are paid, and how much in all.
    summary = await (await payouts.client.get_workflow_handle(task_id).describe()).static_summary()
    assert summary is not None and "payout 12 recipients, 120.66 EUR" in summary


async def test_blocked_payees_within_the_tolerance_are_not_paid_nor_reversed(payouts: PayoutStack) -> None:
    task_id = fresh_id("payout-blocked")
    result = await payouts.submit(task_id, payout(20, blocked=2))
    assert result["state"] == "Processed"
    pay = next(s for s in result["steps"] if s["name"] == "pay")
    assert pay["result"] == {
        "items": 20,
        "tolerance": 2,
        "failed_items": 2,
        "tolerated": 2,
        "processed": 18,
        "compensated": 2,
    }
    ledger = await payouts.ledger(task_id)
    # The rest paid once each; nothing paid to the blocked two, and no reversal sent for them:
    # the bank's lookup was asked about their keys, said nothing was done, and no DELETE came.
    assert count(ledger, "payout_bank.pay") == Counter(f"emp-{n}" for n in range(2, 20))
    asked = [(c["action"], c["key"]) for c in (await payouts.ledger_of(run=task_id))["calls"]]
    assert [c for c in asked if c[0] == "payout_bank.reverse"] == []
    blocked = {f"{task_id}:pay:blocked-{n}" for n in range(2)}
    assert {key for action, key in asked if action == "payout_bank.lookup"} == blocked
    assert [e["sent"] for e in ledger if e["action"] == "payout_notices.send"] == [18]


async def test_blocked_payees_past_the_tolerance_reverse_every_payment_made(payouts: PayoutStack) -> None:
    task_id = fresh_id("payout-past")
    result = await payouts.submit(task_id, payout(20, blocked=3))
    assert result["state"] == "Compensated"
    ledger = await payouts.ledger(task_id)
    paid, reversed_ = count(ledger, "payout_bank.pay"), count(ledger, "payout_bank.reverse")
    assert paid and paid == reversed_ and set(paid.values()) == {1}  # each payee's entries net to zero
    assert not any(who.startswith("blocked-") for who in paid)
    assert count(ledger, "payout_runs.close") == Counter({"payout_runs.close": 1})
    assert not [e for e in ledger if e["action"].startswith("payout_notices.")]  # no notice was ever sent
    assert await payouts.mirror(task_id) == {"validate": "Compensated", "pay": "Compensated", "notice": "Skipped"}


async def test_notices_refused_for_good_reverse_every_payment(payouts: PayoutStack) -> None:
    task_id = fresh_id("payout-fax")
    result = await payouts.submit(task_id, payout(6, channel="fax"))  # the notices desk sends no faxes
    assert result["state"] == "Compensated"
    notice = next(s for s in result["steps"] if s["name"] == "notice")
    assert notice["error_type"] == "ChildCompensated"
    ledger = await payouts.ledger(task_id)
    paid, reversed_ = count(ledger, "payout_bank.pay"), count(ledger, "payout_bank.reverse")
    assert paid == reversed_ == Counter(f"emp-{n}" for n in range(6))
    assert count(ledger, "payout_runs.close") == Counter({"payout_runs.close": 1})
    assert not [e for e in ledger if e["action"].startswith("payout_notices.")]  # refused: nothing to withdraw
    child = await payouts.show(f"{task_id}:notice")
    assert child["task"]["state"] == "Compensated" and child["parent"] == {"task_id": task_id, "step": "notice"}
    assert await payouts.mirror(task_id) == {"validate": "Compensated", "pay": "Compensated", "notice": "Compensated"}


async def test_a_run_that_fails_validation_pays_nobody(payouts: PayoutStack) -> None:
    task_id = fresh_id("payout-jpy")
    result = await payouts.submit(task_id, payout(4, currency="JPY"))  # the bank pays no yen
    assert result["state"] == "Compensated"
    assert await payouts.ledger(task_id) == []  # refused: nothing to close, nobody paid
    assert await payouts.mirror(task_id) == {"validate": "Compensated", "pay": "Skipped", "notice": "Skipped"}
