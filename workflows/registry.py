"""Every task type sas runs, in one place.

A task type is one module under ``workflows/`` - its ``TaskDefinition`` (the steps, from the
step library in ``workflows/definitions.py``) and its five-line ``TaskScheduler`` workflow
class - plus one line in ``TASK_TYPE_MODULES`` below. The worker registers the workflows, and
``sas submit``, ``sas schedule``, the bulk actions and the UI summaries find the type, from
here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache

from temporalio import workflow

from sas.workflows.definitions import TaskDefinition

# task type -> the module that declares it. A new task type: its module, and one line here.
TASK_TYPE_MODULES = {
    "order": "sas.workflows.order",
    "preorder": "sas.workflows.preorder",
}


@dataclass(frozen=True)
class TaskType:
    definition: TaskDefinition
    workflow: type  # the @workflow.defn class, a TaskScheduler

    @property
    def workflow_name(self) -> str:
        """The workflow type name Temporal knows it by."""
        defn = workflow._Definition.must_from_class(self.workflow)
        assert defn.name is not None  # a task type's workflow is never dynamic
        return defn.name


@cache
def task_types() -> dict[str, TaskType]:
    """The registered task types, by name (their modules imported on first use)."""
    from sas.workflows.scheduler import TaskScheduler

    found: dict[str, TaskType] = {}
    for name, module_name in TASK_TYPE_MODULES.items():
        module = importlib.import_module(module_name)
        classes = [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, TaskScheduler)
            and value is not TaskScheduler
            and value.__module__ == module.__name__
        ]
        if len(classes) != 1:
            raise TypeError(f"{module_name} must declare exactly one TaskScheduler workflow, found {len(classes)}")
        definition = classes[0].definition
        if definition.task_type != name:
            raise TypeError(f"{module_name} declares task type {definition.task_type!r}, registered as {name!r}")
        found[name] = TaskType(definition, classes[0])
    return found


def by_workflow_name(name: str) -> TaskType | None:
    return next((t for t in task_types().values() if t.workflow_name == name), None)
