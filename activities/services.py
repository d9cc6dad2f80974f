"""The Agents: one per remote service, each with its forward action and its compensation.

Activity names are ``<service>.<action>``; a step declares them by name
(see ``workflows/definitions.py``).
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity

from activities.agent import Agent, parse_payload
from task_models import StepCall, StepResult


class ReserveRequest(BaseModel):
    order_id: str
    sku: str
    quantity: int


class ReleaseRequest(BaseModel):
    order_id: str
    reserve_key: str


class ChargeRequest(BaseModel):
    order_id: str
    amount_cents: int
    currency: str
    card: str


class RefundRequest(BaseModel):
    order_id: str
    charge_key: str


class ShipRequest(BaseModel):
    order_id: str
    address: str


class CancelShipmentRequest(BaseModel):
    order_id: str
    ship_key: str


class InventoryAgent(Agent):
    @activity.defn(name="inventory.reserve")
    async def reserve(self, call: StepCall) -> StepResult:
        return await self.perform(
            call, "/inventory/reserve", parse_payload(ReserveRequest, call, order_id=call.task_id)
        )

    @activity.defn(name="inventory.release")
    async def release(self, call: StepCall) -> StepResult:
        body = ReleaseRequest(order_id=call.task_id, reserve_key=call.target_key or "")
        return await self.perform(call, "/inventory/release", body)


class PaymentAgent(Agent):
    @activity.defn(name="payment.charge")
    async def charge(self, call: StepCall) -> StepResult:
        return await self.perform(call, "/payment/charge", parse_payload(ChargeRequest, call, order_id=call.task_id))

    @activity.defn(name="payment.refund")
    async def refund(self, call: StepCall) -> StepResult:
        body = RefundRequest(order_id=call.task_id, charge_key=call.target_key or "")
        return await self.perform(call, "/payment/refund", body)


class ShippingAgent(Agent):
    @activity.defn(name="shipping.ship")
    async def ship(self, call: StepCall) -> StepResult:
        return await self.perform(call, "/shipping/ship", parse_payload(ShipRequest, call, order_id=call.task_id))

    @activity.defn(name="shipping.cancel")
    async def cancel(self, call: StepCall) -> StepResult:
        body = CancelShipmentRequest(order_id=call.task_id, ship_key=call.target_key or "")
        return await self.perform(call, "/shipping/cancel", body)
