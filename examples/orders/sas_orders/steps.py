"""The order example's steps: each names its forward Agent and its undo (``sas_orders/agents.py``).

``charge`` runs as the activity ``payment.charge``, a call to the payment service, and its
answer is a ``ChargeResult``.
"""

from __future__ import annotations

from sas.api import StepDefinition
from sas_orders.agents import cancel, charge, refund, release, reserve, ship

RESERVE = StepDefinition("reserve", forward=reserve, undo=release)
CHARGE = StepDefinition("charge", forward=charge, undo=refund)
SHIP = StepDefinition("ship", forward=ship, undo=cancel)
