"""The payout team's own fast tests, as they run in its repository (``python -m pytest tests``
in ``examples/payout``): the payout with its child step run to the end, the child's refusal
undoing the payout, one refused payee within the tolerance, and every failure point of the
payout and its child (the failure matrix). Each runs in Temporal's
time-skipping environment with fake Agents (``sas.api.testing``); no service, no server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api import StepCall, TaskState
from sas.api.testing import FakeAgents, check_failure_matrix, run_task, time_skipping_environment
from sas_payout.notice import PayoutNoticeWorkflow
from sas_payout.workflows import PayoutWorkflow

# Marked, not left to a pytest setting: a team's repository may run these in either asyncio mode.
pytestmark = pytest.mark.asyncio(loop_scope="module")


def payout(count: int) -> dict[str, Any]:
    return {
        "currency": "EUR",
        "recipients": [{"payee_id": f"emp-{n}", "amount_cents": 1_000 + n} for n in range(count)],
    }


def answers() -> dict[str, Any]:
    def paid(call: StepCall) -> dict[str, Any]:
        return {"payment_id": f"pm_{call.item_key}", "amount_cents": call.payload["amount_cents"]}

    return {
        "payout_runs.validate": lambda call: {"run_id": call.task_id, "recipients": 3, "total_cents": 3_003},
        "payout_bank.pay": paid,
        "payout_notices.send": {"notice_id": "nt_1", "sent": 3},
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def test_the_child_step_sends_the_notices_as_a_task_of_its_own(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers())
    result = await run_task(
        env, PayoutWorkflow, payout(3), agents, task_id="payout-1", children=[PayoutNoticeWorkflow], timeout_s=30
    )
    assert result.state == TaskState.PROCESSED
    notice = next(s for s in result.steps if s.name == "notice")
    assert notice.result == {"child_task_id": "payout-1:notice", "state": "Processed"}
    (send,) = [call for name, call in agents.calls if name == "payout_notices.send"]
    assert send.task_id == "payout-1:notice"


async def test_a_refused_notice_undoes_the_child_and_every_payment(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse={"payout_notices.send"})
    result = await run_task(
        env, PayoutWorkflow, payout(3), agents, task_id="payout-2", children=[PayoutNoticeWorkflow], timeout_s=30
    )
    assert result.state == TaskState.COMPENSATED
    # The child undid itself (nothing to undo: its one step was refused), then the payout its
    # payments and its validated run, latest first.
    assert agents.undone() == ["payout_bank.reverse"] * 3 + ["payout_runs.close"]


async def test_one_refused_payee_within_the_tolerance_is_left_unpaid(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=answers(), refuse_items={"payout_bank.pay": "emp-4"})
    result = await run_task(
        env, PayoutWorkflow, payout(20), agents, task_id="payout-3", children=[PayoutNoticeWorkflow], timeout_s=30
    )
    assert result.state == TaskState.PROCESSED
    pay = next(s for s in result.steps if s.name == "pay")
    assert pay.result is not None
    assert (pay.result["tolerance"], pay.result["failed_items"], pay.result["processed"]) == (2, 1, 19)
    paid = sorted(key.rsplit(":", 1)[1] for name, key in agents.effects if name == "payout_bank.pay")
    assert paid == sorted(f"emp-{n}" for n in range(20) if n != 4)


async def test_every_failure_point_of_the_payout_and_its_child_keeps_the_promise(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(
        env, PayoutWorkflow, payout(3), answers=answers(), children=[PayoutNoticeWorkflow]
    )
    names = {case.name for case in cases}
    # The child's step is a failure point of its own, refused in the child task's call.
    assert "notice: send refused" in names
    assert {"validate refused", "pay refused", "validate's undo refused"} <= names
