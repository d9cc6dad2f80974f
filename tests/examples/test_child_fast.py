"""A type with a child step in Temporal's time-skipping environment, through sas.api's test kit
as a team would test it: run_task registers the child's type (found among the registered ones,
or given) and decides for the child's failed steps as the Supervisor would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from sas.api import StepState, TaskState
from sas.api.testing import FakeAgents, check_failure_matrix, run_task, time_skipping_environment
from sas_orders.workflows import OrderWorkflow
from tests.e2e.children import GiftOrderWorkflow
from tests.helpers import fresh_id
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


async def test_a_completed_child_is_undone_by_its_clean_up_when_a_later_step_of_its_parent_is_refused(
    env: WorkflowEnvironment,
) -> None:
    parent = fresh_id("gift-fast")
    child = f"{parent}:gift"
    agents = FakeAgents(answers=dict(ANSWERS), refuse_when={"shipping.ship": lambda call: call.task_id == parent})
    result = await run_task(env, GiftOrderWorkflow, order(), agents, task_id=parent, timeout_s=30)
    assert result.state == TaskState.COMPENSATED
    assert agents.done() == ["inventory.reserve", "inventory.reserve", "payment.charge", "shipping.ship"]
    # The child had completed: its clean-up, started by the parent, undid its three steps latest
    # first, from what its rows recorded; then the parent undid its own reserve.
    undos = [(name, key) for name, key in agents.effects if key.endswith(":undo")]
    assert undos == [
        ("shipping.cancel", f"{child}:ship:undo"),
        ("payment.refund", f"{child}:charge:undo"),
        ("inventory.release", f"{child}:reserve:undo"),
        ("inventory.release", f"{parent}:reserve:undo"),
    ]
    gift = next(s for s in result.steps if s.name == "gift")
    assert gift.state == StepState.COMPENSATED


async def test_a_clean_up_its_parent_did_not_start_is_refused_by_the_fake_store() -> None:
    from sas.api.testing._fake_store import FakeStore
    from sas.task_models.cleanup import CleanupRequest

    with pytest.raises(ApplicationError, match="is not the child of step gift of someone-else") as refused:
        FakeStore().cleanup_plan(CleanupRequest(task_id="x:gift", parent_task_id="someone-else", parent_step="gift"))
    assert refused.value.non_retryable


async def test_the_failure_matrix_covers_the_child_task_s_steps_and_undoes_a_completed_child(
    env: WorkflowEnvironment,
) -> None:
    cases = {c.name: c for c in await check_failure_matrix(env, GiftOrderWorkflow, order(), answers=ANSWERS)}
    # Each step of the child order is a case of its own, refused in the child's calls only.
    assert {"gift: reserve refused", "gift: charge refused", "gift: ship refused"} <= set(cases)
    child_refused = cases["gift: charge refused"]
    assert child_refused.outcome == TaskState.COMPENSATED
    assert child_refused.undone == ["inventory.release", "inventory.release"]
    # The parent's own ship refused after its child completed: the child's clean-up undid its
    # three steps latest first, then the parent its reserve.
    late = cases["ship refused"]
    assert late.outcome == TaskState.COMPENSATED
    assert late.undone == ["shipping.cancel", "payment.refund", "inventory.release", "inventory.release"]
    # The parent's reserve's undo refused: parked, then the operator's compensate ends it.
    assert cases["reserve's undo refused"].outcome == TaskState.COMPENSATED
