"""The Scheduler: one Temporal workflow per task type, all running ``TaskScheduler``."""

from workflows.order import OrderWorkflow
from workflows.preorder import PreorderWorkflow

ALL_WORKFLOWS = [OrderWorkflow, PreorderWorkflow]

__all__ = ["ALL_WORKFLOWS", "OrderWorkflow", "PreorderWorkflow"]
