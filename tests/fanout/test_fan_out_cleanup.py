"""A fan-out task whose Scheduler workflow is terminated mid-fan-out (some recipients paid): the
Supervisor's clean-up undoes every attempted item under its own key, listed from the dead
workflow's history, so each payment made is refunded exactly once and the task is Compensated."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from temporalio.client import Client

from bench._payroll_service import Ledger
from sas.task_models import StepState, TaskState
from tests.fanout.test_fan_out_e2e import payroll, payroll_stack, payroll_type, recipients
from tests.helpers import fresh_id, wait_until

pytestmark = pytest.mark.slow
__all__ = ["payroll", "payroll_type"]  # the fixtures, used by name


async def test_a_fan_out_terminated_mid_fan_out_is_refunded_by_the_clean_up(
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    ledger.slow_s = 1.0
    payload = recipients(30, slow=12)
    task_id = fresh_id("payroll-terminated")
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        handle = await stack.submit(task_id, payload, "PayrollRunWorkflow")

        async def paid() -> int:
            return sum(1 for action, _ in ledger.entries if action == "pay")

        await wait_until(paid, lambda n: n >= 3, what="the first payments made")
        await handle.terminate("closed from outside mid-fan-out")

        async def task_state() -> str | None:
            record = await stack.record(task_id)
            return None if record is None else str(record.task.state)

        await wait_until(task_state, lambda s: s == TaskState.COMPENSATED, timeout=120, what="the clean-up done")
        record = await stack.record(task_id)
        cleanup = await stack.client.get_workflow_handle(f"cleanup-{task_id}").result()
    assert record is not None
    assert {s.name: s.state for s in record.steps} == {"pay": StepState.COMPENSATED, "report": StepState.SKIPPED}
    assert cleanup == {"pay": "Compensated", "report": "Skipped"}
    payments = Counter(who for action, who in ledger.entries if action == "pay")
    refunds = Counter(who for action, who in ledger.entries if action == "refund")
    assert payments and len(payments) < len(payload["recipients"])  # terminated mid-fan-out
    assert refunds == payments and set(payments.values()) == {1}  # each payment refunded exactly once
