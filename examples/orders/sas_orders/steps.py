"""The order example's services, its Agents' declarations and its steps.

Each service names the class that implements its Agents (``sas_orders/agents.py``), which only
the worker loads. A step references a declaration: ``PaymentDefs.charge`` runs as the activity
``payment.charge`` on the payment service's own queue, and its answer is a ``ChargeResult``.
"""

from __future__ import annotations

from sas.api import Service, StepCall, StepDefinition, StepResult
from sas_orders.models import CancelResult, ChargeResult, RefundResult, ReleaseResult, ReserveResult, ShipResult

INVENTORY = Service("inventory", agent="sas_orders.agents:InventoryAgent")
PAYMENT = Service("payment", agent="sas_orders.agents:PaymentAgent")
SHIPPING = Service("shipping", agent="sas_orders.agents:ShippingAgent")


class InventoryDefs:
    @INVENTORY.agent_defn("reserve", ReserveResult)
    async def reserve(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @INVENTORY.agent_defn("release", ReleaseResult)
    async def release(self, call: StepCall) -> StepResult:
        raise NotImplementedError


class PaymentDefs:
    @PAYMENT.agent_defn("charge", ChargeResult)
    async def charge(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @PAYMENT.agent_defn("refund", RefundResult)
    async def refund(self, call: StepCall) -> StepResult:
        raise NotImplementedError


class ShippingDefs:
    @SHIPPING.agent_defn("ship", ShipResult)
    async def ship(self, call: StepCall) -> StepResult:
        raise NotImplementedError

    @SHIPPING.agent_defn("cancel", CancelResult)
    async def cancel(self, call: StepCall) -> StepResult:
        raise NotImplementedError


RESERVE = StepDefinition("reserve", forward=InventoryDefs.reserve, undo=InventoryDefs.release)
CHARGE = StepDefinition("charge", forward=PaymentDefs.charge, undo=PaymentDefs.refund)
SHIP = StepDefinition("ship", forward=ShippingDefs.ship, undo=ShippingDefs.cancel)
