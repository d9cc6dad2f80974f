"""The task types of the fair-share bench (bench/fairness.py): one payment of one step on the
payroll service (bench/_payroll_service.py), declared four times: for team A and team B, each
carrying its team as its fairness key, and without a team (``plain_*``), the baseline with no
key at all."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from bench._payroll import PAY_ONE, PaymentInput
    from sas.api import TaskDefinition, task_workflow

FairAWorkflow = task_workflow(TaskDefinition("fair", PaymentInput, (PAY_ONE,), team="team_a"), "FairAWorkflow")
FairBWorkflow = task_workflow(TaskDefinition("fair", PaymentInput, (PAY_ONE,), team="team_b"), "FairBWorkflow")
PlainAWorkflow = task_workflow(TaskDefinition("plain_a", PaymentInput, (PAY_ONE,)), "PlainAWorkflow")
PlainBWorkflow = task_workflow(TaskDefinition("plain_b", PaymentInput, (PAY_ONE,)), "PlainBWorkflow")

TYPES = ("fair_a", "fair_b", "plain_a", "plain_b")
