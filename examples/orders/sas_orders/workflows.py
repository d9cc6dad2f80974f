"""The order example's task types: the module its ``sas.task_types`` entry point names.

Their workflow type names (``OrderWorkflow``, ``PreorderWorkflow``) and their Agents' activity
names are what running tasks and recorded histories know them by: they never change.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import TaskDefinition, task_workflow
    from sas_orders.models import OrderInput, PreorderInput
    from sas_orders.steps import CHARGE, RESERVE, SHIP
    from sas_orders.story import order_line, order_story

# Their lines in the UI are theirs to say (sas_orders/story.py): sas knows nothing of amounts.
ORDER = TaskDefinition("order", OrderInput, (RESERVE, CHARGE, SHIP), summary=order_line, details=order_story)
PREORDER = TaskDefinition("preorder", PreorderInput, (RESERVE, CHARGE), summary=order_line, details=order_story)

OrderWorkflow = task_workflow(ORDER, "OrderWorkflow")
PreorderWorkflow = task_workflow(PREORDER, "PreorderWorkflow")
