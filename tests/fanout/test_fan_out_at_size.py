"""The bench's many-at-once fan-out, shrunk: 150 recipients in three batches of 50, 25 calls at
once, 2 % of its items (3) allowed to fail, on each backend. Refusals inside the tolerance are
undone one by one and the task goes on, with every count exact and the ledger matching it item
by item; one refusal past it undoes the whole task, every payment made refunded once and none
made to a refused recipient."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import Client

from bench._payroll_service import Ledger
from sas.task_models import StepState, TaskResult, TaskState
from tests.fanout.test_fan_out_e2e import payroll, payroll_stack, payroll_type, recipients
from tests.helpers import fresh_id

pytestmark = pytest.mark.slow
ITEMS, TOLERATED = 150, 3  # Tolerance(percent=2) of 150
__all__ = ["payroll", "payroll_type"]  # fixtures, shared with the 30-item tests


@pytest.fixture
def at_size(payroll_type: None) -> Iterator[None]:
    yield


def paid_and_refunded(ledger: Ledger) -> tuple[Counter[str], Counter[str]]:
    paid = Counter(who for action, who in ledger.entries if action == "pay")
    refunded = Counter(who for action, who in ledger.entries if action == "refund")
    return paid, refunded


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
async def test_refusals_within_the_tolerance_at_size_leave_exact_counts_and_ledger(
    at_size: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    db_url: str,
) -> None:
    url, ledger = payroll
    payload = recipients(ITEMS, refused=TOLERATED)  # one refusal at the head of each batch
    async with payroll_stack(url, client, temporal_address, services, db_url) as stack:
        task_id = fresh_id("payroll-size")
        result: TaskResult = await (await stack.submit(task_id, payload, "PayrollTolerantWorkflow")).result()
        mirrored = await stack.record(task_id)
    assert result.state == TaskState.PROCESSED
    (pay,) = result.steps
    assert pay.state == StepState.PROCESSED
    assert pay.result == {
        "items": ITEMS,
        "tolerance": TOLERATED,
        "failed_items": TOLERATED,
        "tolerated": TOLERATED,
        "processed": ITEMS - TOLERATED,
        "compensated": 3,
    }
    # Each recipient but the refused paid exactly once; nothing refunded (a refusal paid nothing).
    paid, refunded = paid_and_refunded(ledger)
    assert paid == Counter(r["id"] for r in payload["recipients"] if not r["id"].startswith("refuse"))
    assert refunded == Counter()
    assert len(ledger.paid) == ITEMS - TOLERATED
    assert mirrored is not None
    (row,) = mirrored.steps
    assert row.state == StepState.PROCESSED and row.result == pay.result


@pytest.mark.parametrize("db_url", ["sqlite", "postgresql"], indirect=True)
async def test_one_refusal_past_the_tolerance_at_size_refunds_every_payment_made(
    at_size: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    db_url: str,
) -> None:
    url, ledger = payroll
    payload = recipients(ITEMS, refused=TOLERATED + 1)
    async with payroll_stack(url, client, temporal_address, services, db_url) as stack:
        task_id = fresh_id("payroll-size-past")
        result: TaskResult = await (await stack.submit(task_id, payload, "PayrollTolerantWorkflow")).result()
        mirrored = await stack.record(task_id)
    assert result.state == TaskState.COMPENSATED
    (pay,) = result.steps
    assert (pay.state, pay.error_type) == (StepState.COMPENSATED, "FanOutPastTolerance")
    paid, refunded = paid_and_refunded(ledger)
    assert paid == refunded and set(paid.values()) <= {1}  # each payment made once, refunded once
    assert not any(who.startswith("refuse") for who in paid)
    # Every payment the service holds is refunded: nothing stands under the compensated task.
    assert set(ledger.paid.values()) == set(ledger.refunded)
    # The step's counts agree with the ledger: what was paid was undone, the refused were
    # refused, the rest never called.
    counts = pay.result or {}
    assert counts["items"] == ITEMS
    assert counts.get("compensated", 0) == len(paid) + TOLERATED + 1
    assert sum(v for k, v in counts.items() if k not in ("items", "tolerance", "failed_items", "tolerated")) == ITEMS
    assert mirrored is not None and mirrored.task.state == TaskState.COMPENSATED
    (row,) = mirrored.steps
    assert row.state == StepState.COMPENSATED  # a compensated step keeps no forward result there
