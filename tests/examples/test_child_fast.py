"""A type with a child step in Temporal's time-skipping environment, through sas.api's test kit
as a team would test it: run_task registers the child's type (found among the registered ones,
or given) and decides for the child's failed steps as the Supervisor would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
from sas_orders.workflows import OrderWorkflow
from tests.e2e.children import GiftOrderWorkflow
from tests.stack import order

ANSWERS: dict[str, Any] = {
    "inventory.reserve": {"reservation_id": "rsv_1"},
    "payment.charge": {"charge_id": "ch_1", "amount_cents": 1299, "currency": "EUR"},
    "shipping.ship": {"shipment_id": "shp_1"},
}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def test_a_type_with_a_child_step_runs_its_child_to_the_end(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=dict(ANSWERS))
    result = await run_task(env, GiftOrderWorkflow, order(), agents, task_id="gift-fast-1", timeout_s=30)
    assert result.state == TaskState.PROCESSED
    # The parent's reserve, the child order's three steps, then the parent's ship.
    assert [(name, call.task_id) for name, call in agents.calls] == [
        ("inventory.reserve", "gift-fast-1"),
        ("inventory.reserve", "gift-fast-1:gift"),
        ("payment.charge", "gift-fast-1:gift"),
        ("shipping.ship", "gift-fast-1:gift"),
        ("shipping.ship", "gift-fast-1"),
    ]


async def test_a_child_s_step_refused_for_good_is_decided_and_undoes_child_and_parent(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(answers=dict(ANSWERS), flaky={"payment.charge"}, refuse={"shipping.ship"})
    result = await run_task(
        env, GiftOrderWorkflow, order(), agents, task_id="gift-fast-2", timeout_s=30, children=[OrderWorkflow]
    )
    assert result.state == TaskState.COMPENSATED
    # The child's charge failed once (retried, as the ladder decides), its ship was refused for
    # good: the child undid itself latest first, then the parent its reserve.
    assert agents.done() == ["inventory.reserve", "inventory.reserve", "payment.charge"]
    assert agents.undone() == ["payment.refund", "inventory.release", "inventory.release"]


async def test_a_child_type_neither_given_nor_registered_is_refused_naming_it(
    env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sas.api.testing import _running

    monkeypatch.setattr(_running, "_registered_workflow", lambda task_type: None)
    with pytest.raises(
        TypeError, match="child step 'gift' runs task type 'order', which is neither given nor registered"
    ):
        await run_task(env, GiftOrderWorkflow, order(), FakeAgents(), task_id="gift-fast-3", timeout_s=30)
