"""The Scheduler: one Temporal workflow per task type, all running ``TaskScheduler``.

The classes are imported on first use, not with the package: the workflow sandbox re-imports
a workflow's module, and so this package, for every new run, and importing all three here
would re-apply ``@workflow.defn`` to each of them every time (workflows/runner.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workflows.cleanup import CleanupWorkflow
    from workflows.order import OrderWorkflow
    from workflows.preorder import PreorderWorkflow

_WHERE = {"CleanupWorkflow": "cleanup", "OrderWorkflow": "order", "PreorderWorkflow": "preorder"}

__all__ = ["ALL_WORKFLOWS", "CleanupWorkflow", "OrderWorkflow", "PreorderWorkflow"]


def __getattr__(name: str) -> Any:
    if name == "ALL_WORKFLOWS":
        return [__getattr__(n) for n in ("OrderWorkflow", "PreorderWorkflow", "CleanupWorkflow")]
    if name in _WHERE:
        return getattr(importlib.import_module(f"workflows.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'workflows' has no attribute {name!r}")
