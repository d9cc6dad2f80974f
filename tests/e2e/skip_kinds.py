"""Task types with a step an operator may skip, over the real remote services, for
tests/e2e/test_skip_step.py (registered there through SAS_TASK_TYPES__MODULES). Kept apart from
the test module: the workflow sandbox imports this module for every run."""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import TaskDefinition, task_workflow
    from sas_orders.models import OrderInput
    from sas_orders.steps import CHARGE, RESERVE, SHIP

# A shipment the order can do without: the customer may collect it in store instead.
COLLECTABLE_SHIP = replace(SHIP, skippable=True)
# Shipped before it is paid: a ship the carrier refuses can be skipped, and the charge still runs.
COLLECTABLE = TaskDefinition("collectable_order", OrderInput, (RESERVE, COLLECTABLE_SHIP, CHARGE))
# Paid first, the charge its point of no return: a skip of the ship after it must be forced.
PREPAID = TaskDefinition("prepaid_order", OrderInput, (RESERVE, CHARGE, COLLECTABLE_SHIP), pivot="charge")

CollectableOrderWorkflow = task_workflow(COLLECTABLE)
PrepaidOrderWorkflow = task_workflow(PREPAID)
