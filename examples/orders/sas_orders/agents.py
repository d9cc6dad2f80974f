"""The order example's services and their Agents: for each, its forward actions and their undos.

Hand-written rather than declared as data because the ship step sends one call per parcel,
keeping a checkpoint between them. Each is one function, declared on its service. None reads
an earlier step's result (``reads=()``), so none is sent one: the charge's client secret never
reaches the shipping Agent, and each call is smaller in the task's history. An undo names
the service's own id of the effect it undoes, from its forward step's result, or looked up by
the forward key (``agent.forward_id``). The worker runs each for its service, behind its bulkhead.

Imported with the task types (``sas_orders/steps.py``), in the workflow sandbox too: only
sas.api, pydantic and the order's models here.
"""

from __future__ import annotations

from pydantic import BaseModel

from sas.api import AgentContext, Service, StepCall, StepResult
from sas_orders.models import CancelResult, ChargeResult, RefundResult, ReleaseResult, ReserveResult, ShipResult

INVENTORY = Service("inventory")
PAYMENT = Service("payment")
SHIPPING = Service("shipping")


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


@INVENTORY.action("reserve", ReserveResult, reads=())
async def reserve(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform("/inventory/reserve", agent.payload(ReserveRequest, order_id=call.task_id))


@INVENTORY.action("release", ReleaseResult)
async def release(call: StepCall, agent: AgentContext) -> StepResult:
    reservation_id = await agent.forward_id("reservation_id")
    body = ReleaseRequest(order_id=call.task_id, reserve_key=call.target_key or "", reservation_id=reservation_id)
    return await agent.perform("/inventory/release", body)


@PAYMENT.action("charge", ChargeResult, reads=())
async def charge(call: StepCall, agent: AgentContext) -> StepResult:
    return await agent.perform("/payment/charge", agent.payload(ChargeRequest, order_id=call.task_id))


@PAYMENT.action("refund", RefundResult)
async def refund(call: StepCall, agent: AgentContext) -> StepResult:
    charge_id = await agent.forward_id("charge_id")
    body = RefundRequest(order_id=call.task_id, charge_key=call.target_key or "", charge_id=charge_id)
    return await agent.perform("/payment/refund", body)


@SHIPPING.action("ship", ShipResult, reads=())
async def ship(call: StepCall, agent: AgentContext) -> StepResult:
    """Ship the order's parcels, one call each, then the shipment itself (its id is the step's
    result, which the cancel names). After each parcel the attempt saves a checkpoint,
    ``{"parcels_done": i}``; a retried attempt skips the parcels done."""
    order = agent.payload(ShipOrder, order_id=call.task_id)
    if order.parcels > 1:
        for parcel in range(agent.last_checkpoint("parcels_done") + 1, order.parcels + 1):
            body = ParcelRequest(order_id=order.order_id, address=order.address, parcel=parcel)
            await agent.send("/shipping/ship", body, part=f"parcel-{parcel}")
            agent.save_checkpoint(parcels_done=parcel)
    shipment = ShipRequest(order_id=order.order_id, address=order.address)
    return await agent.perform("/shipping/ship", shipment)


@SHIPPING.action("cancel", CancelResult)
async def cancel(call: StepCall, agent: AgentContext) -> StepResult:
    shipment_id = await agent.forward_id("shipment_id")
    body = CancelShipmentRequest(order_id=call.task_id, ship_key=call.target_key or "", shipment_id=shipment_id)
    return await agent.perform("/shipping/cancel", body)
