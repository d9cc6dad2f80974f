"""The Scheduler: one Temporal workflow per task type, all running ``TaskScheduler``.

The task types are found by ``workflows/registry.py`` (the ``sas.task_types`` entry points and
``SAS_TASK_TYPES__MODULES``). They are imported on first use, not with the package: the
workflow sandbox re-imports a workflow's module, and so this package, for every new run, and
importing all of them here would re-apply ``@workflow.defn`` to each of them every time
(workflows/runner.py). ``sas.workflows.OrderWorkflow`` still finds a registered class by name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sas.workflows.cleanup import CleanupWorkflow

if __name__ != "sas.workflows":
    # This folder is installed as sas.workflows (sas/workflows links to it). Imported by its bare name, from
    # the repository root, it would be a second copy of every class in it, which Temporal's data
    # converter and isinstance checks would not recognise.
    raise ImportError(f"import sas.workflows, not {__name__}: the workflows/ folder is part of the sas package")


__all__ = ["ALL_WORKFLOWS", "CleanupWorkflow"]


def __getattr__(name: str) -> Any:
    if not name[:1].isupper():
        # A submodule not yet imported (`from sas.workflows import registry`): never a task
        # type's workflow, so loading it must not discover the task types (which may be broken).
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    from sas.workflows.registry import task_types

    if name == "ALL_WORKFLOWS":
        # Every registered task type's workflow (workflows/registry.py), the clean-up, and a fan-out's batches.
        batch = importlib.import_module("sas.workflows.fanout_batch").FanOutBatchWorkflow
        return [t.workflow for t in task_types().values()] + [__getattr__("CleanupWorkflow"), batch]
    if name == "CleanupWorkflow":
        return importlib.import_module("sas.workflows.cleanup").CleanupWorkflow
    found = [t for t in task_types().values() if t.workflow.__name__ == name]
    if not found:
        raise AttributeError(f"module 'sas.workflows' has no attribute {name!r}")
    if len(found) > 1:
        # Two teams' classes of one name (north's and south's BookingWorkflow): import it from its module.
        where = ", ".join(f"{t.module}.{name}" for t in found)
        raise AttributeError(
            f"sas.workflows.{name} is more than one task type's workflow ({where}): import it from its module"
        )
    return found[0].workflow
