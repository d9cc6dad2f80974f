"""The order example's steps as two teams' task types: team A's order carries its team as its
fairness key, team B's its customer under its team (``fairness_from``). Registered by the tests
that need them through SAS_TASK_TYPES__MODULES (tests/e2e/test_fair_shares.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import TaskDefinition, task_workflow
    from sas_orders.models import OrderInput
    from sas_orders.workflows import ORDER

TEAM_A_ORDER = TaskDefinition("order", OrderInput, ORDER.stages, team="team_a")
TEAM_B_ORDER = TaskDefinition("order", OrderInput, ORDER.stages, team="team_b", fairness_from="customer_id")
TeamAOrderWorkflow = task_workflow(TEAM_A_ORDER, "TeamAOrderWorkflow")
TeamBOrderWorkflow = task_workflow(TEAM_B_ORDER, "TeamBOrderWorkflow")
