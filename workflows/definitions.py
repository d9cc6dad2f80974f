"""The step library, as the Scheduler imports it: the declarations live in
``sas/task_types/definitions.py`` (below the workflows, so that the worker's Agents can read the
task types too), and the order example's steps are declared here until it moves out."""

from __future__ import annotations

from sas.task_models.activity_defs import InventoryDefs, PaymentDefs, ShippingDefs
from sas.task_types.definitions import (
    MAX_WAIT,
    AgentCall,
    DeadlineOutcome,
    Parallel,
    Step,
    StepContext,
    StepDefinition,
    TaskDefinition,
    Wait,
    When,
)

__all__ = [
    "CHARGE",
    "MAX_WAIT",
    "RESERVE",
    "SHIP",
    "AgentCall",
    "DeadlineOutcome",
    "Parallel",
    "Step",
    "StepContext",
    "StepDefinition",
    "TaskDefinition",
    "Wait",
    "When",
]

RESERVE = StepDefinition("reserve", forward=InventoryDefs.reserve, undo=InventoryDefs.release)
CHARGE = StepDefinition("charge", forward=PaymentDefs.charge, undo=PaymentDefs.refund)
SHIP = StepDefinition("ship", forward=ShippingDefs.ship, undo=ShippingDefs.cancel)
