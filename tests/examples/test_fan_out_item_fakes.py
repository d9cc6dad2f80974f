"""One item of a fan-out refused, or failing once, in a fast test: FakeAgents' ``refuse_when`` and
``flaky_when`` name the calls they hold for (here, by the item's key), so a team's fast tests can
refuse one payee of a payroll and see exact counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from bench._payroll import PayrollRunWorkflow
from sas.api import StepCall, TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment

PAYROLL = {"recipients": [{"id": f"r{n}", "cents": 100 + n} for n in range(10)]}


def paid(call: StepCall) -> dict[str, Any]:
    return {"payment_id": f"pm_{call.item_key}"}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def answers() -> dict[str, Any]:
    return {"payroll.pay": paid, "payroll.refund": {"refunded": True}, "payroll.report": {"report_id": "rp_1"}}


async def test_one_item_refused_within_the_tolerance_is_counted_and_the_rest_are_paid(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse_when={"payroll.pay": lambda call: call.item_key == "r3"})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, task_id="payroll-fast-1", timeout_s=30)
    assert result.state == TaskState.PROCESSED
    pay = next(s for s in result.steps if s.name == "pay")
    assert pay.result is not None and pay.result["processed"] == 9 and pay.result["compensated"] == 1
    paid_keys = sorted(key.rsplit(":", 1)[1] for name, key in agents.effects if name == "payroll.pay")
    assert paid_keys == sorted(f"r{n}" for n in range(10) if n != 3)


async def test_one_item_failing_once_is_retried_and_every_item_is_paid(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), flaky_when={"payroll.pay": lambda call: call.item_key == "r7"})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, task_id="payroll-fast-2", timeout_s=30)
    assert result.state == TaskState.PROCESSED
    attempts = [call.item_key for name, call in agents.calls if name == "payroll.pay"]
    assert attempts.count("r7") == 2 and all(attempts.count(f"r{n}") == 1 for n in range(10) if n != 7)
