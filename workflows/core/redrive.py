"""The pure rule of what a redrive (``sas redrive``) of a task finished in Error may keep.

A redrive runs the task again from one step; the steps of the stages before it are kept done,
as the finished incarnation left them, and never called again (``sas.state_store.redrive``
says which rows and keys). A step can only be kept when its row holds all of it:

- a plain step or a wait, not a fan-out (its items' state lives in its batches' runs) nor a
  child step (its child is a task of its own, finished with the parent's run);
- with no secret result field: the state store keeps a result without its secret fields
  (``sas.task_models.results``), and the steps after it, and its undo, would read it short.

The client asks this before it starts the redrive, and the Scheduler again before its accept.
"""

from __future__ import annotations

from sas.task_models.activity_defs import agent_result
from sas.task_models.results import secret_fields
from sas.task_types.fan_out import ForEach
from sas.task_types.steps import ChildTask, StepDefinition
from sas.task_types.task_definition import TaskDefinition


def redrive_refused(definition: TaskDefinition, from_step: str) -> str | None:
    """Why ``definition``'s tasks cannot be redriven from ``from_step``; None: they can."""
    names = [s.name for s in definition.steps]
    if from_step not in names:
        return f"{definition.task_type} has no step {from_step!r} (its steps: {', '.join(names)})"
    for step in definition.stages_before(from_step):
        if isinstance(step, ForEach):
            return f"step {step.name} is a fan-out, whose items cannot be kept: redrive from {step.name} or before"
        if isinstance(step, ChildTask):
            return f"step {step.name} starts a child task, which cannot be kept: redrive from {step.name} or before"
        model = agent_result(step.agent) if isinstance(step, StepDefinition) else None
        if model is not None and secret_fields(model):
            return (
                f"step {step.name}'s result has secret fields, which the state store does not keep:"
                f" redrive from {step.name} or before"
            )
    return None
