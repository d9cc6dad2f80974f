"""The step library, as the Scheduler imports it: the declarations live in ``sas.task_types``
(``task_definition``, ``steps``, ``fan_out``, ``groups``), below the workflows, so that the
worker's Agents can read the task types too. Teams import them from ``sas.api``."""

from __future__ import annotations

from sas.task_types.choices import Choice, Option
from sas.task_types.fan_out import ForEach
from sas.task_types.groups import Parallel, Sequence, leaves
from sas.task_types.steps import (
    MAX_WAIT,
    AgentCall,
    ChildTask,
    DeadlineOutcome,
    Step,
    StepContext,
    StepDefinition,
    Wait,
    When,
)
from sas.task_types.task_definition import MAX_DETAILS, MAX_SUMMARY, TaskDefinition

__all__ = [
    "MAX_DETAILS",
    "MAX_SUMMARY",
    "MAX_WAIT",
    "AgentCall",
    "ChildTask",
    "Choice",
    "DeadlineOutcome",
    "ForEach",
    "Option",
    "Parallel",
    "Sequence",
    "Step",
    "StepContext",
    "StepDefinition",
    "TaskDefinition",
    "Wait",
    "When",
    "leaves",
]
