"""The step library, as the Scheduler imports it: the declarations live in
``sas/task_types/definitions.py``, below the workflows, so that the worker's Agents can read the
task types too. Teams import them from ``sas.api``."""

from __future__ import annotations

from sas.task_types.definitions import (
    MAX_DETAILS,
    MAX_SUMMARY,
    MAX_WAIT,
    AgentCall,
    ChildTask,
    DeadlineOutcome,
    ForEach,
    Parallel,
    Sequence,
    Step,
    StepContext,
    StepDefinition,
    TaskDefinition,
    Wait,
    When,
    leaves,
)

__all__ = [
    "MAX_DETAILS",
    "MAX_SUMMARY",
    "MAX_WAIT",
    "AgentCall",
    "ChildTask",
    "DeadlineOutcome",
    "ForEach",
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
