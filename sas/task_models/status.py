"""What the Scheduler answers to its ``status`` query and returns when it ends, and operator requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sas.task_models.ids import MAX_STEP_NAME
from sas.task_models.states import StepState, TaskState
from sas.task_models.text import UserText

# The largest FailureCount a request may carry: far above any ladder (retries and cool-down tries
# are bounded in the settings), far below the state store's 32-bit column.
MAX_FAILURE_COUNT = 100_000


class StepStatus(BaseModel):
    """One step as its Scheduler sees it: state, FailureCount, runs, last error, result, note."""

    # Its None fields, and those named below at their default, are left out of its payloads
    # (sas.payload_codec.converter.left_out): it rides in every task's history, and reads back
    # the same without them.
    history_omits_none: ClassVar[bool] = True
    history_omits_at_default: ClassVar[frozenset[str]] = frozenset({"failure_count", "permanent"})

    name: str
    position: int
    state: StepState = StepState.PENDING
    failure_count: int = 0
    runs: int = Field(default=0, description="How many times the Scheduler has started this step.")
    last_error: str | None = None
    error_type: str | None = None
    permanent: bool = False
    result: dict[str, Any] | None = Field(
        default=None, description="The forward result, without its secret fields (task_models.results)."
    )
    stage: int | None = Field(default=None, description="Steps of one stage run side by side; None: its position.")
    note: str | None = Field(
        default=None, description="Why the step was Skipped, or what a Waiting step waits for and until when."
    )
    wait_until: datetime | None = Field(default=None, description="A Waiting step's deadline (UTC).")
    waits_for: str | None = Field(
        default=None, description="The signal a Waiting step waits for (its update is request_<signal>); None: a time."
    )


class TaskStatus(BaseModel):
    """What a task's ``status`` query answers: its state and each step's."""

    task_id: str
    task_type: str
    state: TaskState
    current_step: str | None = None
    steps: list[StepStatus]
    needs_operator: bool = False
    events: list[str] = Field(
        default_factory=list,
        description="Decisions and operator actions, oldest first: the newest 200, each cut to MAX_EVENT_TEXT bytes.",
    )
    events_dropped: int = Field(default=0, description="How many older events were dropped to keep the newest 200.")


class TaskResult(BaseModel):
    """What a task workflow returns when it ends: Processed or Compensated, and its steps."""

    # Its None fields are left out of its payloads (sas.payload_codec.converter.left_out): it
    # rides in every task's history, and reads back the same without them.
    history_omits_none: ClassVar[bool] = True

    task_id: str
    state: TaskState
    steps: list[StepStatus]


class OperatorRequest(BaseModel):
    """Payload of the ``retry`` and ``compensate`` signals. Every field is optional, so
    ``temporal workflow signal --name retry`` with no input works too."""

    model_config = ConfigDict(extra="forbid")

    step: str | None = Field(
        default=None,
        max_length=MAX_STEP_NAME,
        description="Step to retry; the one waiting for a decision if unset (a step name: at most 32 characters).",
    )
    failure_count: int | None = Field(
        default=None,
        ge=0,
        le=MAX_FAILURE_COUNT,
        description="Set by the Supervisor: the FailureCount its decision was made at (at most 100,000).",
    )
    decision_id: str | None = Field(
        default=None,
        max_length=20,
        pattern=r"^[0-9]+$",
        description="The Supervisor's decision (decisions.id); a request is the Supervisor's only if it exists.",
    )
    reset_failure_count: bool = Field(
        default=False,
        description="Start FailureCount again from 0 before retrying (sas resubmit: out of the dead letter).",
    )
    force: bool = Field(
        default=False,
        description="compensate only: undo the task although it is past its pivot (its point of no return);"
        " an operator's, with a reason (sas compensate --force --reason).",
    )
    by: UserText = Field(default="operator", max_length=200)
    reason: UserText = Field(default="", max_length=2000)


class Approval(BaseModel):
    """Payload of a wait step's signal (``approve`` by default) and of its ``request_<signal>`` update:
    who decided, whether to go on, and why."""

    model_config = ConfigDict(extra="forbid")

    step: str | None = Field(
        default=None, max_length=MAX_STEP_NAME, description="The wait step; the one waiting if unset."
    )
    approved: bool = Field(default=True, description="False: the task is undone (compensated).")
    by: UserText = Field(default="operator", max_length=200)
    reason: UserText = Field(default="", max_length=2000)


class OperatorAnswer(BaseModel):
    """What the ``request_retry`` / ``request_compensate`` updates answer once accepted."""

    accepted: bool = True
    message: str
    task_state: TaskState


class CallbackEvent(BaseModel):
    """A status event posted to the submitter's callback URL."""

    event_id: str = Field(description="Stable across retries: task id, Scheduler transition and kind.")
    kind: str = Field(description="received | step_completed | failed | completed | compensated | needs_operator")
    task_id: str
    task_type: str
    state: TaskState
    step: str | None = None
    detail: str | None = None
    at: datetime
    url: str
    results: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="The results of the steps done so far, by step, without secret fields."
    )
