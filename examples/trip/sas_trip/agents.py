"""The charge's hand-written Agent: the card is charged what the flight and the hotel cost.

The worker loads this module (``Service("cards", agent=...)`` names it), never a workflow.
"""

from __future__ import annotations

from sas.api import Agent, StepCall, StepResult, implements
from sas_trip.workflows import CardsDefs


class CardsAgent(Agent, CardsDefs):
    @implements(CardsDefs.charge)
    async def charge(self, call: StepCall) -> StepResult:
        amount = int(call.results["flight"]["fare_cents"]) + int(call.results["hotel"]["total_cents"])
        body = {
            "trip": call.task_id,
            "card": call.payload["card"],
            "currency": call.payload["currency"],
            "amount_cents": amount,
        }
        return await self.perform(call, "/cards/charge", body)

    @implements(CardsDefs.refund)
    async def refund(self, call: StepCall) -> StepResult:
        charge_id = await self.forward_id(call, "cards", "charge_id")
        if charge_id is None:
            # The card was never charged under the forward key (the service's lookup says so).
            return await self.nothing_to_undo(call)
        return await self.perform(call, "/cards/refund", {"charge_id": charge_id})
