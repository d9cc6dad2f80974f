"""The types that travel between clients, workflows, activities and the Supervisor.

Every one is a pydantic model carried by temporalio's pydantic data converter,
so a field can be added without breaking a running workflow.
"""

from sas.task_models.ids import TASK_ID_PATTERN, validate_task_id
from sas.task_models.plans import (
    RESUBMIT_MEMO,
    AcceptOutcome,
    ParentLink,
    PivotRole,
    Resubmission,
    StepPlan,
    StepPolicyValues,
    TaskAccepted,
    TaskPlan,
    incarnation_key,
)
from sas.task_models.results import Secret, secret_fields, shown
from sas.task_models.states import ACTIVE_STEP_STATES, StepState, TaskState
from sas.task_models.status import (
    MAX_FAILURE_COUNT,
    Approval,
    CallbackEvent,
    OperatorAnswer,
    OperatorRequest,
    StepStatus,
    TaskResult,
    TaskStatus,
)
from sas.task_models.steps import AuditRecord, MirrorStamp, StepCall, StepResult, StepTransition, TransitionBatch

__all__ = [
    "ACTIVE_STEP_STATES",
    "MAX_FAILURE_COUNT",
    "RESUBMIT_MEMO",
    "TASK_ID_PATTERN",
    "AcceptOutcome",
    "Approval",
    "AuditRecord",
    "CallbackEvent",
    "MirrorStamp",
    "OperatorAnswer",
    "OperatorRequest",
    "ParentLink",
    "PivotRole",
    "Resubmission",
    "Secret",
    "StepCall",
    "StepPlan",
    "StepPolicyValues",
    "StepResult",
    "StepState",
    "StepStatus",
    "StepTransition",
    "TaskAccepted",
    "TaskPlan",
    "TaskResult",
    "TaskState",
    "TaskStatus",
    "TransitionBatch",
    "incarnation_key",
    "secret_fields",
    "shown",
    "validate_task_id",
]
