"""A task type's workflow class without the boilerplate: ``TripWorkflow = task_workflow(TRIP)``.

The class it makes is the five lines a task type would otherwise write - a ``TaskScheduler``
with the definition, and a ``@workflow.run`` that takes the raw input - made at the module
level of the module that calls it, under the name it is bound to. Temporal's sandbox imports a
workflow class by its module and name for every run, so the variable must have the class's
name (the discovery checks it).
"""

from __future__ import annotations

import sys
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult
    from sas.task_types.names import default_workflow_name
    from sas.task_types.task_definition import TaskDefinition
    from sas.workflows.scheduler import TaskScheduler


# (module, class name) -> the class made for them. Temporal's sandbox re-imports a task type's
# module for every new workflow run, calling task_workflow again each time; applying
# @workflow.defn to a TaskScheduler subclass (inspecting every member) was most of a run's start
# (docs/benchmarks.md). The class is the same for an equal definition, and holds nothing that a
# run changes (its state is the instance's), so it is made once per process. A definition that
# differs (a predicate defined in the re-imported module is a new function each time) makes a
# new class, as before.
_MADE: dict[tuple[str, str], type[TaskScheduler]] = {}


def task_workflow(
    definition: TaskDefinition, name: str | None = None, *, module: str | None = None
) -> type[TaskScheduler]:
    """The Scheduler workflow class of a task type.

    ```python
    TRIP = TaskDefinition("trip", TripInput, (Parallel(FLIGHT, HOTEL), CHARGE))
    TripWorkflow = task_workflow(TRIP)
    ```

    Args:
        definition: The task type.
        name: The workflow type name Temporal knows it by, and the class's name: bind the class
            to a module variable of that name. Default: the task type in CamelCase plus
            ``Workflow`` (``approved_trip`` -> ``ApprovedTripWorkflow``). A team's type is known
            to Temporal under its team (``north.BookingWorkflow``). Never change it once tasks
            have run: running workflows and their histories are found by it.
        module: The module it belongs to; default: the caller's.

    Returns:
        A ``@workflow.defn`` class: register it by naming its module in the ``sas.task_types``
        entry point group, or give it to a test worker.
    """
    class_name = name or default_workflow_name(definition.short_name)
    if not class_name.isidentifier():
        raise ValueError(f"task_workflow(name={class_name!r}): the name must be a Python identifier")
    # A team's type is known to Temporal under its team, so two teams' BookingWorkflow do not clash.
    temporal_name = class_name if definition.team is None else f"{definition.team}.{class_name}"
    owner = module or sys._getframe(1).f_globals["__name__"]
    made_before = _MADE.get((owner, class_name))
    if made_before is not None and made_before.definition == definition:
        return made_before

    # `self` unannotated: the SDK reads the run method's hints as its argument types, and an
    # annotated `self` would count as one - decoding the input as a TaskScheduler.
    async def run(self, raw: RawValue) -> TaskResult:
        # The raw payload: input that fails to decode or validate fails the task at once, with
        # InvalidInput, instead of a workflow task retried for ever (workflows/inputs.py).
        return await self.execute(raw)

    run.__module__ = owner
    run.__qualname__ = f"{class_name}.run"
    namespace: dict[str, Any] = {
        "definition": definition,
        "run": workflow.run(run),
        "__module__": owner,
        "__qualname__": class_name,
        "__doc__": f"The Scheduler of task type {definition.task_type!r} (made by sas.api.task_workflow).",
    }
    made: type[TaskScheduler] = workflow.defn(name=temporal_name)(type(class_name, (TaskScheduler,), namespace))
    _MADE[(owner, class_name)] = made
    return made
