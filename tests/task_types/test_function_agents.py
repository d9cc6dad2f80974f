"""An Agent declared in one place, on the function that does its work (Service.action): what a
step names, and what is refused when it is declared."""

from __future__ import annotations

import pytest

from sas.api import AgentContext, Service, StepCall, StepDefinition, StepResult, StepResultModel
from sas.task_models.activity_defs import activity_name, agent_result
from sas.task_types.agent_declarations import agent_function
from sas.task_types.services import service_of_ref

BILLING = Service("billing")


class Billed(StepResultModel):
    bill_id: str


def test_the_declared_function_is_what_a_step_names_under_its_activity_name() -> None:
    @BILLING.action("bill", Billed)
    async def bill(call: StepCall, agent: AgentContext) -> StepResult:
        return await agent.perform("/billing/bill", {})

    step = StepDefinition("bill", forward=bill)
    assert step.agent == activity_name(bill) == "billing.bill"
    assert agent_result("billing.bill") is Billed
    assert service_of_ref(bill) is BILLING and agent_function(bill) is not None
    assert bill.__name__ == "bill"


def test_an_agent_that_is_not_async_or_takes_other_arguments_is_refused_when_declared() -> None:
    with pytest.raises(TypeError, match=r"billing\.sync: the Agent .*sync must be an async def"):

        @BILLING.action("sync", Billed)  # type: ignore[arg-type]
        def sync(call: StepCall, agent: AgentContext) -> StepResult:
            raise NotImplementedError

    with pytest.raises(TypeError, match=r"takes \(call: StepCall, agent: AgentContext\)"):

        @BILLING.action("lonely", Billed)  # type: ignore[arg-type]
        async def lonely(call: StepCall) -> StepResult:
            raise NotImplementedError

    with pytest.raises(ValueError, match="an action is 1-40 characters"):
        BILLING.action("Bad Name", Billed)
