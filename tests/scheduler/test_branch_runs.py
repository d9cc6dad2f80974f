"""Branches run by the Scheduler, in Temporal's time-skipping environment with fake Agents:
a branch of a step, a wait for a time and a nested group with a conditional step runs in order
beside the hotel; a refusal in one branch undoes every branch, latest first within each; a
refusal while a branch waits interrupts the wait and starts nothing more in it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
from tests.scheduler.branch_kinds import LayoverTripTestWorkflow

TRIP = {"traveller": "Ada", "amount_cents": 100, "insure": False}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def test_a_branch_runs_its_step_wait_and_nested_group_in_order_beside_the_hotel(
    env: WorkflowEnvironment,
) -> None:
    agents = FakeAgents()
    result = await run_task(env, LayoverTripTestWorkflow, TRIP, agents, task_id="layover-1")
    assert result.state == TaskState.PROCESSED
    states = {s.name: s.state for s in result.steps}
    assert states == {
        "flight": "Processed",
        "layover": "Processed",
        "seat": "Processed",
        "insure": "Skipped",  # its condition, asked when its branch reached it
        "hotel": "Processed",
        "charge": "Processed",
    }
    done = agents.done()
    assert done.index("testair.book") < done.index("testair.seat") and done[-1] == "testcard.charge"
    # One stage in the plan: the group's, for every step of its branches.
    assert {s.name: s.stage for s in result.steps} == dict.fromkeys(states, 0) | {"charge": None}
    seat = next(call for name, call in agents.calls if name == "testair.seat")
    assert set(seat.results) == {"flight", "layover"}  # what came before it in its branch


async def test_a_refused_charge_undoes_every_branch_latest_first_within_each(env: WorkflowEnvironment) -> None:
    agents = FakeAgents(refuse={"testcard.charge"})
    result = await run_task(env, LayoverTripTestWorkflow, TRIP, agents, task_id="layover-2")
    assert result.state == TaskState.COMPENSATED
    undone = agents.undone()
    assert sorted(undone) == ["testair.cancel", "testair.unseat", "testinn.cancel"]
    assert undone.index("testair.unseat") < undone.index("testair.cancel")  # the seat, then its flight


async def test_a_seat_refused_in_a_nested_group_undoes_the_other_branch_and_what_came_before_it(
    env: WorkflowEnvironment,
) -> None:
    agents = FakeAgents(refuse={"testair.seat"})
    result = await run_task(env, LayoverTripTestWorkflow, {**TRIP, "insure": True}, agents, task_id="layover-3")
    assert result.state == TaskState.COMPENSATED
    assert sorted(agents.undone()) == ["testair.cancel", "testinn.cancel"]  # the refused seat did nothing
    states = {s.name: s.state for s in result.steps}
    assert states["layover"] == "Compensated" and states["charge"] == "Skipped"


async def test_a_refusal_while_a_branch_waits_interrupts_the_wait_and_starts_nothing_more_in_it(
    env: WorkflowEnvironment,
) -> None:
    agents = FakeAgents(refuse={"testinn.book"})
    result = await run_task(env, LayoverTripTestWorkflow, TRIP, agents, task_id="layover-4")
    assert result.state == TaskState.COMPENSATED
    states = {s.name: s.state for s in result.steps}
    assert states == {
        "flight": "Compensated",
        "layover": "Skipped",  # interrupted while it waited: it had no effect
        "seat": "Skipped",
        "insure": "Skipped",
        "hotel": "Compensated",
        "charge": "Skipped",
    }
    assert "testair.seat" not in [name for name, _ in agents.calls]
    assert agents.undone() == ["testair.cancel"]
