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

ORDER = TaskDefinition("order", OrderInput, (RESERVE, CHARGE, SHIP))
PREORDER = TaskDefinition("preorder", PreorderInput, (RESERVE, CHARGE))

OrderWorkflow = task_workflow(ORDER, "OrderWorkflow")
PreorderWorkflow = task_workflow(PREORDER, "PreorderWorkflow")
