"""A team's task type whose input takes any number and any JSON (a float field, a dict of
anything): where a NaN or an infinity could get in if nothing refused it. Its one step waits a
moment, so a task of it needs no service. Registered by tests/bad_input/test_json_numbers.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.api import TaskDefinition, TaskInput, Wait, task_workflow


class RatedInput(TaskInput):
    rate: float = 1.0
    extra: dict[str, Any] = Field(default_factory=dict)


RATED = TaskDefinition("rated", RatedInput, (Wait("settle", delay=timedelta(seconds=1)),))
RatedWorkflow = task_workflow(RATED, "RatedWorkflow")
