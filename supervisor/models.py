"""What flows between the Supervisor workflow and its activities."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class SupervisorPolicy(BaseModel):
    """Thresholds in force, read from the Supervisor worker's settings at each sweep."""

    failure_threshold: int = 3
    overdue_grace_s: float = 3.0
    batch_size: int = 100
    interval_s: float = 5.0
    sweeps_per_run: int = 200


class DueStep(BaseModel):
    """A step the scan found waiting for a decision or past its CompleteBy."""

    task_id: str
    task_type: str
    workflow_type: str
    task_queue: str
    step: str
    state: str
    failure_count: int
    version: int
    complete_by: datetime | None
    complete_by_s: float
    locked_by: str | None = None
    last_error: str | None = None
    error_type: str | None = None
    permanent: bool = False


class AlertSpec(BaseModel):
    severity: str = Field(description="warning | critical")
    kind: str
    message: str
    suggested_action: str


class Decision(BaseModel):
    """What the Supervisor decided for one step, keyed (task, step, FailureCount)."""

    task_id: str
    step: str
    kind: str = Field(description="retry | compensate | park: the signal sent to the Scheduler")
    failure_count: int = Field(description="FailureCount after this decision")
    seen_failure_count: int
    seen_version: int
    observed_state: str
    reason: str
    next_look_at: datetime = Field(description="New CompleteBy: when the step is due again if nothing moves")
    last_error: str | None = None
    alert: AlertSpec | None = None


class ScanResult(BaseModel):
    policy: SupervisorPolicy
    due: list[DueStep]
    unsent: int = Field(default=0, description="Decisions recorded but not yet signalled (a crashed sweep)")


class ApplyResult(BaseModel):
    claimed: int = 0
    skipped: int = 0
    signalled: int = 0
    alerts: int = 0


class SupervisorInput(BaseModel):
    sweeps_done: int = 0
