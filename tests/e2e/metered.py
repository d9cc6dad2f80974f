"""A one-step task type whose one call goes to a service of the test's own, ``meter``, so that
every request that service counts is one of its Agents' (registered by tests/e2e/test_rate_limit.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import Service, StepDefinition, StepResultModel, TaskDefinition, TaskId, TaskInput, task_workflow


class MeteredInput(TaskInput):
    n: int


class Pinged(StepResultModel):
    ok: bool


METER = Service("meter")
PING = StepDefinition("ping", forward=METER.post("/meter/ping", body={"task": TaskId()}, result=Pinged), read_only=True)
MeteredWorkflow = task_workflow(TaskDefinition("metered", MeteredInput, (PING,)), "MeteredWorkflow")
