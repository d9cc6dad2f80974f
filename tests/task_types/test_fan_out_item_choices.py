"""One item of a fan-out refused, failing or slowed in a fast test, picked by its key or by a
predicate over the item (``FakeAgents.refuse_items``, ``fail_items``, ``slow_items``): the other
items are paid, and the step's result counts exactly the one picked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from bench._payroll import PayrollRunWorkflow
from sas.api import StepCall, TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment

PAYROLL = {"recipients": [{"id": f"r{n}", "cents": 100 + n} for n in range(10)]}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def answers() -> dict[str, Any]:
    def paid(call: StepCall) -> dict[str, Any]:
        return {"payment_id": f"pm_{call.item_key}"}

    return {"payroll.pay": paid, "payroll.refund": {"refunded": True}, "payroll.report": {"report_id": "rp_1"}}


def paid_items(agents: FakeAgents) -> list[str]:
    return sorted(key.rsplit(":", 1)[1] for name, key in agents.effects if name == "payroll.pay")


def pay_result(steps: list[Any]) -> dict[str, Any]:
    pay = next(s for s in steps if s.name == "pay")
    assert pay.result is not None
    return dict(pay.result)


async def test_one_item_refused_by_its_key(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse_items={"payroll.pay": "r3"})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, timeout_s=30)
    assert result.state == TaskState.PROCESSED
    counts = pay_result(result.steps)
    assert (counts["failed_items"], counts["compensated"], counts["processed"]) == (1, 1, 9)
    assert paid_items(agents) == sorted(f"r{n}" for n in range(10) if n != 3)
    # Refused for good: called once, never retried.
    assert [c.item_key for n, c in agents.calls if n == "payroll.pay"].count("r3") == 1


async def test_items_refused_by_a_predicate_over_the_item(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse_items={"payroll.pay": lambda item: item["cents"] >= 108})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, timeout_s=30)
    assert result.state == TaskState.PROCESSED
    assert pay_result(result.steps)["failed_items"] == 2
    assert paid_items(agents) == [f"r{n}" for n in range(8)]


async def test_items_refused_past_the_tolerance_undo_the_task(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse_items={"payroll.pay": {"r0", "r1", "r2", "r3"}})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, timeout_s=30)
    assert result.state == TaskState.COMPENSATED  # four refused: more than the three it may fail
    assert sorted(agents.undone()) == ["payroll.refund"] * 6


async def test_an_item_whose_every_attempt_fails_is_failed_after_its_retries(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), fail_items={"payroll.pay": "r7"})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, timeout_s=30)
    assert result.state == TaskState.PROCESSED
    assert pay_result(result.steps)["failed_items"] == 1
    attempts = [c.item_key for n, c in agents.calls if n == "payroll.pay"]
    assert attempts.count("r7") > 1 and all(attempts.count(f"r{n}") == 1 for n in range(10) if n != 7)
    assert "r7" not in paid_items(agents)


async def test_a_slowed_item_is_held_while_the_others_are_paid(env: WorkflowEnvironment) -> None:
    release = asyncio.Event()
    others_paid: list[list[str]] = []

    async def held(call: StepCall) -> None:
        await release.wait()

    agents = FakeAgents(answers=answers(), slow_items={"payroll.pay": ("r5", held)})

    async def release_once_the_others_are_paid() -> None:
        async with asyncio.timeout(30):
            while len(paid_items(agents)) < 9:
                await asyncio.sleep(0.05)
        others_paid.append(paid_items(agents))
        release.set()

    releasing = asyncio.ensure_future(release_once_the_others_are_paid())
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, timeout_s=30)
    await releasing
    assert result.state == TaskState.PROCESSED
    assert others_paid == [sorted(f"r{n}" for n in range(10) if n != 5)]
    assert paid_items(agents) == sorted(f"r{n}" for n in range(10))
