"""The order example's Agents: one per service, each with its forward actions and their undos.

Hand-written rather than declared as data because the ship step sends one call per parcel,
keeping a checkpoint between them. Each implements its declaration in ``sas_orders/steps.py``;
an undo names the service's own id of the effect it undoes, from its forward step's result, or
looked up by the forward key (``Agent.forward_id``). The worker loads this module (the services
name it), builds each Agent with its service's caller and registers its activities on the
service's own queue.
"""

from __future__ import annotations

from pydantic import BaseModel

from sas.api import (
    Agent,
    StepCall,
    StepResult,
    attempt_deadline,
    implements,
    last_checkpoint,
    parse_payload,
    save_checkpoint,
)
from sas_orders.steps import InventoryDefs, PaymentDefs, ShippingDefs


class ReserveRequest(BaseModel):
    order_id: str
    sku: str
    quantity: int


class ReleaseRequest(BaseModel):
    order_id: str
    reserve_key: str
    reservation_id: str | None


class ChargeRequest(BaseModel):
    order_id: str
    amount_cents: int
    currency: str
    card: str


class RefundRequest(BaseModel):
    order_id: str
    charge_key: str
    charge_id: str | None


class ShipRequest(BaseModel):
    order_id: str
    address: str


class ShipOrder(ShipRequest):
    """What the ship step reads from the order: the shipment and how many parcels it has."""

    parcels: int = 1


class ParcelRequest(ShipRequest):
    parcel: int


class CancelShipmentRequest(BaseModel):
    order_id: str
    ship_key: str
    shipment_id: str | None


class InventoryAgent(Agent, InventoryDefs):
    @implements(InventoryDefs.reserve)
    async def reserve(self, call: StepCall) -> StepResult:
        return await self.perform(
            call, "/inventory/reserve", parse_payload(ReserveRequest, call, order_id=call.task_id)
        )

    @implements(InventoryDefs.release)
    async def release(self, call: StepCall) -> StepResult:
        reservation_id = await self.forward_id(call, "inventory", "reservation_id")
        body = ReleaseRequest(order_id=call.task_id, reserve_key=call.target_key or "", reservation_id=reservation_id)
        return await self.perform(call, "/inventory/release", body)


class PaymentAgent(Agent, PaymentDefs):
    @implements(PaymentDefs.charge)
    async def charge(self, call: StepCall) -> StepResult:
        return await self.perform(call, "/payment/charge", parse_payload(ChargeRequest, call, order_id=call.task_id))

    @implements(PaymentDefs.refund)
    async def refund(self, call: StepCall) -> StepResult:
        charge_id = await self.forward_id(call, "payment", "charge_id")
        body = RefundRequest(order_id=call.task_id, charge_key=call.target_key or "", charge_id=charge_id)
        return await self.perform(call, "/payment/refund", body)


class ShippingAgent(Agent, ShippingDefs):
    @implements(ShippingDefs.ship)
    async def ship(self, call: StepCall) -> StepResult:
        """Ship the order's parcels, one call each, then the shipment itself (its id is the
        step's result, which the cancel names). After each parcel the attempt saves a
        checkpoint, ``{"parcels_done": i}``; a retried attempt skips the parcels done."""
        order = parse_payload(ShipOrder, call, order_id=call.task_id)
        if order.parcels > 1:
            for parcel in range(last_checkpoint("parcels_done") + 1, order.parcels + 1):
                body = ParcelRequest(order_id=order.order_id, address=order.address, parcel=parcel)
                await self._remote.post(
                    "/shipping/ship",
                    body.model_dump(mode="json"),
                    f"{call.idempotency_key}:parcel-{parcel}",
                    attempt_deadline(),
                )
                save_checkpoint(parcels_done=parcel)
        shipment = ShipRequest(order_id=order.order_id, address=order.address)
        return await self.perform(call, "/shipping/ship", shipment)

    @implements(ShippingDefs.cancel)
    async def cancel(self, call: StepCall) -> StepResult:
        shipment_id = await self.forward_id(call, "shipping", "shipment_id")
        body = CancelShipmentRequest(order_id=call.task_id, ship_key=call.target_key or "", shipment_id=shipment_id)
        return await self.perform(call, "/shipping/cancel", body)
