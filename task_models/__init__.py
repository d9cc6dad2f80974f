"""The types that travel between clients, workflows, activities and the Supervisor.

Every one is a pydantic model carried by temporalio's pydantic data converter,
so a field can be added without breaking a running workflow.
"""

from task_models.orders import OrderInput, PreorderInput
from task_models.states import ACTIVE_STEP_STATES, StepState, TaskState
from task_models.steps import (
    AuditRecord,
    MirrorStamp,
    StepCall,
    StepPlan,
    StepPolicyValues,
    StepResult,
    StepTransition,
    TaskAccepted,
    TaskPlan,
    TransitionBatch,
)
from task_models.status import CallbackEvent, OperatorAnswer, OperatorRequest, StepStatus, TaskResult, TaskStatus
from task_models.ids import TASK_ID_PATTERN, validate_task_id

__all__ = [
    "AuditRecord",
    "CallbackEvent",
    "ACTIVE_STEP_STATES",
    "MirrorStamp",
    "OperatorAnswer",
    "OperatorRequest",
    "OrderInput",
    "PreorderInput",
    "StepCall",
    "StepPlan",
    "StepPolicyValues",
    "StepResult",
    "StepState",
    "StepStatus",
    "StepTransition",
    "TASK_ID_PATTERN",
    "TaskAccepted",
    "TaskPlan",
    "TaskResult",
    "TaskState",
    "TransitionBatch",
    "TaskStatus",
    "validate_task_id",
]
