"""The states of a step and of a task, as kept in the state store.

Step:  Pending -> Processing -> Processed
                      |-> Failed (the Agent gave up; waits for a decision) -> Processing (retry)
       any attempted step -> Compensating -> Compensated
                                   |-> CompensationFailed (waits for a decision) -> Compensating
       never attempted when the task is undone -> Skipped
       parked by the Supervisor or an operator -> Error (waits for an operator)
       a wait step: Pending -> Waiting (a time, or an approval, until its deadline) -> Processed
       a conditional step whose condition is false -> Skipped (the reason recorded)

Task:  Pending -> Processing -> Processed
       Processing -> Failed (a step waits for a decision) -> Processing | Compensating
       Compensating -> Compensated
       any -> Error (parked: an operator must act)
"""

from __future__ import annotations

from enum import StrEnum


class StepState(StrEnum):
    """A step's state (the module's docstring draws how one leads to another)."""

    PENDING = "Pending"
    PROCESSING = "Processing"
    PROCESSED = "Processed"
    FAILED = "Failed"
    COMPENSATING = "Compensating"
    COMPENSATED = "Compensated"
    COMPENSATION_FAILED = "CompensationFailed"
    SKIPPED = "Skipped"
    ERROR = "Error"
    WAITING = "Waiting"


class TaskState(StrEnum):
    """A task's state; ``terminal`` once Processed or Compensated."""

    PENDING = "Pending"
    PROCESSING = "Processing"
    FAILED = "Failed"
    COMPENSATING = "Compensating"
    PROCESSED = "Processed"
    COMPENSATED = "Compensated"
    ERROR = "Error"

    @property
    def terminal(self) -> bool:
        return self in (TaskState.PROCESSED, TaskState.COMPENSATED)


# States in which an agent may be working on the step right now.
ACTIVE_STEP_STATES = (StepState.PROCESSING, StepState.COMPENSATING)
