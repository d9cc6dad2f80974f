"""The Scheduler: one Temporal workflow per task type, all running ``TaskScheduler``."""

from workflows.cleanup import CleanupWorkflow
from workflows.order import OrderWorkflow
from workflows.preorder import PreorderWorkflow

ALL_WORKFLOWS = [OrderWorkflow, PreorderWorkflow, CleanupWorkflow]

__all__ = ["ALL_WORKFLOWS", "CleanupWorkflow", "OrderWorkflow", "PreorderWorkflow"]
