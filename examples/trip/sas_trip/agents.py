"""The charge's hand-written Agents: the card is charged what the flight and the hotel cost,
which only code can work out. Each is one function, declared on the cards service.

Imported with the task type (``sas_trip/workflows.py``), in the workflow sandbox too: only
sas.api and the trip's models here.
"""

from __future__ import annotations

from sas.api import AgentContext, Service, StepCall, StepResult
from sas_trip.models import Charged, Refunded

CARDS = Service("cards")


@CARDS.action("charge", Charged, reads=("flight", "hotel"))
async def charge(call: StepCall, agent: AgentContext) -> StepResult:
    amount = int(call.results["flight"]["fare_cents"]) + int(call.results["hotel"]["total_cents"])
    body = {
        "trip": call.task_id,
        "card": call.payload["card"],
        "currency": call.payload["currency"],
        "amount_cents": amount,
    }
    return await agent.perform("/cards/charge", body)


@CARDS.action("refund", Refunded)
async def refund(call: StepCall, agent: AgentContext) -> StepResult:
    charge_id = await agent.forward_id("charge_id")
    if charge_id is None:
        # The card was never charged under the forward key (the service's lookup says so).
        return await agent.nothing_to_undo()
    return await agent.perform("/cards/refund", {"charge_id": charge_id})
