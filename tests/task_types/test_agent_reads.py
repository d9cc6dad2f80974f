"""An Agent is sent only the earlier results it reads: a declared call's ``Result`` sources, a
hand-written Agent's ``Service.action(reads=)``; one that says nothing is sent every earlier
step's (tests/scheduler/test_branch_runs.py: the seat). Checked when the type is loaded, and
as the Scheduler sends them, in Temporal's time-skipping environment with fake Agents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from sas.api import (
    AgentContext,
    HttpCall,
    Input,
    Result,
    Service,
    StepCall,
    StepDefinition,
    StepResult,
    StepResultModel,
    TaskDefinition,
    TaskState,
)
from sas.api.testing import FakeAgents, run_task, time_skipping_environment
from sas.task_types.call_checks import calls_problem
from sas_orders.models import OrderInput
from sas_orders.workflows import OrderWorkflow

LEDGER = Service("ledger")


class Posted(StepResultModel):
    entry_id: str


class Entry(BaseModel):
    account: str


@LEDGER.action("open", Posted, reads=())
async def open_entry(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform("/ledger/open", {})


@LEDGER.action("post", Posted, reads=("open",))
async def post_entry(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform("/ledger/post", {"entry": call.results["open"]["entry_id"]})


@LEDGER.action("close", Posted, reads=("later",))
async def close_entry(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform("/ledger/close", {})


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def test_what_an_agent_reads_is_its_declaration() -> None:
    declared = HttpCall(
        LEDGER,
        "POST",
        "/ledger/book",
        result=Posted,
        body={"entry": Result("open", "entry_id"), "account": Input("account")},
        query={"after": Result("post", "entry_id")},
    )
    assert StepDefinition("book", forward=declared).reads == {"open", "post"}
    assert StepDefinition("post", forward=post_entry).reads == {"open"}
    assert StepDefinition("open", forward=open_entry).reads == frozenset()


def test_reads_naming_a_step_that_has_not_finished_is_refused_when_the_type_loads() -> None:
    steps = (StepDefinition("close", forward=close_entry), StepDefinition("later", forward=open_entry))
    problem = calls_problem(TaskDefinition("entries", Entry, steps))
    assert problem is not None and "reads 'later', which is not a step that finishes before" in problem
    fine = (StepDefinition("open", forward=open_entry), StepDefinition("post", forward=post_entry))
    assert calls_problem(TaskDefinition("entries", Entry, fine)) is None


def test_reads_given_as_one_name_is_refused_when_declared() -> None:
    with pytest.raises(TypeError, match=r"reads= takes step names, as a tuple: reads=\('open',\)"):
        LEDGER.action("again", Posted, reads="open")


async def test_the_orders_agents_are_sent_no_earlier_result_so_no_secret_reaches_shipping(
    env: WorkflowEnvironment,
) -> None:
    secret = "ch_1_secret_never_sent"
    agents = FakeAgents(
        answers={"payment.charge": {"charge_id": "ch_1", "amount_cents": 1299, "client_secret": secret}}
    )
    order = OrderInput(customer_id="c-1", sku="BOOK-1", quantity=1, amount_cents=1299, address="1 Main St")
    result = await run_task(env, OrderWorkflow, order, agents, task_id="reads-order-1")
    assert result.state == TaskState.PROCESSED
    sent = {name: call.results for name, call in agents.calls}
    assert sent == {"inventory.reserve": {}, "payment.charge": {}, "shipping.ship": {}}
    assert all(secret not in call.model_dump_json() for _, call in agents.calls)
