"""A team's task type whose pivot is a hand-written charge on a service that declares its own
lookup path (``Service(lookup="/payments/lookup")``), refunded by a hand-written Agent
(registered by tests/e2e/test_declared_lookup.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import (
        AgentContext,
        Service,
        StepCall,
        StepDefinition,
        StepPolicyValues,
        StepResult,
        StepResultModel,
        TaskDefinition,
        TaskInput,
        task_workflow,
    )


class GalaInput(TaskInput):
    guest: str
    amount_cents: int


class Charged(StepResultModel):
    charge_id: str


class Refunded(StepResultModel):
    refunded: bool


# Its REST paths live under /payments, the lookup too: nothing lives at /gala_billing/...
BILLING = Service("gala_billing", lookup="/payments/lookup")


@BILLING.action("charge", Charged)
async def charge(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform(
        "/payments/charge", {"guest": call.payload["guest"], "amount_cents": call.payload["amount_cents"]}
    )


@BILLING.action("refund", Refunded)
async def refund(call: StepCall, agent: AgentContext) -> StepResult:
    charge_id = await agent.forward_id("charge_id")
    if charge_id is None:
        return await agent.nothing_to_undo()
    return await agent.perform("/payments/refund", {"charge_id": charge_id})


# One attempt, cut off at 2 s: the charge's answer is lost, and the step waits for an operator.
CHARGE = StepDefinition("charge", forward=charge, undo=refund, policy=StepPolicyValues(complete_by_s=2, max_attempts=1))
GalaWorkflow = task_workflow(TaskDefinition("gala", GalaInput, (CHARGE,), pivot="charge"), "GalaWorkflow")
