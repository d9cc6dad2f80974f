"""What flows between the Supervisor workflow and its activities."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The clean-up workflow's input and stamps live with the models it shares with the Scheduler.
from sas.task_models.cleanup import CLEANUP_SEQ, CleanupInput, CleanupStep  # noqa: F401
from sas.task_models.ladder import Ladder

DecisionKind = Literal["retry", "compensate", "park", "wait", "cleanup"]
# Decisions that become a signal to the Scheduler (or the clean-up workflow); the others are notes.
SIGNALLED_KINDS = ("retry", "compensate", "park")


class SupervisorPolicy(BaseModel):
    """Thresholds in force, read from the Supervisor worker's settings at each sweep."""

    failure_threshold: int = 3
    overdue_grace_s: float = 3.0
    batch_size: int = 100
    interval_s: float = 5.0
    max_interval_s: float = 60.0
    idle_backoff: float = 2.0
    sweeps_per_run: int = 200
    queue_check_s: float = 15.0
    orphan_check_s: float = 15.0
    shards: int = 1
    webhook: bool = False
    apply_chunk: int = Field(
        default=32,
        ge=1,
        description="Decisions applied per activity; between two, refusals recorded since the scan are decided first",
    )


class DueStep(BaseModel):
    """A step the scan found waiting for a decision or past its CompleteBy."""

    task_id: str
    task_type: str
    workflow_type: str
    task_queue: str
    step: str
    state: str
    failure_count: int
    resets: int = Field(default=0, description="FailureCount resets so far: the epoch of its decisions")
    version: int
    complete_by: datetime | None
    complete_by_s: float
    locked_by: str | None = None
    last_error: str | None = None
    error_type: str | None = None
    permanent: bool = False
    updated_at: datetime | None = Field(default=None, description="When the Scheduler last wrote the row (Failed at)")
    undo_retries: int = Field(default=0, description="Supervisor retries of this step's undo so far")
    ladder: Ladder = Ladder()
    pivot: Literal["pivot", "forward_only"] | None = Field(
        default=None,
        description="The step is its task type's point of no return, or after it: retried and parked, never undone",
    )


class AlertSpec(BaseModel):
    severity: str = Field(description="warning | critical")
    kind: str
    message: str
    suggested_action: str


class Decision(BaseModel):
    """What the Supervisor decided for one step, keyed (task, step, FailureCount, kind)."""

    task_id: str
    step: str
    kind: DecisionKind = Field(description="retry | compensate | park: the signal sent; wait | cleanup: see models")
    failure_count: int = Field(description="FailureCount after this decision")
    seen_failure_count: int
    seen_version: int
    epoch: int = 0
    observed_state: str
    reason: str
    next_look_at: datetime = Field(description="New CompleteBy: when the step is due again if nothing moves")
    last_error: str | None = None
    alert: AlertSpec | None = None
    cooled_down: bool = Field(
        default=False, description="A retry after a cool-down: with others of its service, a backlog let go at once"
    )


class ScanInput(BaseModel):
    shard: int = 0
    orphan_cursor: dict[str, str] = Field(default_factory=dict)
    refusals_only: bool = Field(
        default=False, description="Only the steps refused for good that are due: a look between a sweep's chunks"
    )


class ScanResult(BaseModel):
    policy: SupervisorPolicy
    due: list[DueStep]
    unsent: int = Field(default=0, description="Decisions recorded but not yet carried out (a crashed sweep)")
    resolved: int = Field(default=0, description="Alerts resolved because their task recovered")
    undelivered: int = Field(default=0, description="Alerts waiting for the webhook")
    incidents: int = Field(default=0, description="Open incidents (shard 0 only): causes with many failing tasks")
    incident_tasks: int = Field(default=0, description="Tasks in those incidents")


class ApplyInput(BaseModel):
    decisions: list[Decision] = Field(default_factory=list)
    shard: int = 0


class ApplyResult(BaseModel):
    claimed: int = 0
    skipped: int = 0
    deferred: int = Field(default=0, description="Put off: Temporal shows the step waiting, or the workflow finished")
    held: int = Field(default=0, description="Put off: the step's service's circuit breaker holds its work")
    signalled: int = 0
    alerts: int = 0
    failed: int = Field(default=0, description="Not carried out: its task's own fault, alerted (task_check_failed)")


class OrphanCheckInput(BaseModel):
    shard: int = 0
    cursor: dict[str, str] = Field(default_factory=dict, description="Per task state: where the last check stopped")


class OrphanCheckResult(BaseModel):
    checked: int = 0
    orphans: list[str] = Field(default_factory=list, description="Tasks whose workflow was closed from outside")
    repaired: int = Field(default=0, description="Rows reconciled with Temporal")
    cursor: dict[str, str] = Field(default_factory=dict)


class QueueCheckInput(BaseModel):
    backlog: dict[str, int] = Field(default_factory=dict, description="Backlog per queue at the previous check")


class QueueCheckResult(BaseModel):
    queues: int = 0
    unpolled: list[str] = Field(default_factory=list)
    backlog: dict[str, int] = Field(default_factory=dict)
    opened: int = 0
    resolved: int = 0
    stuck: int = Field(default=0, description="Workflows Temporal reports stuck in workflow task failures")
    held: list[str] = Field(default_factory=list, description="Services whose circuit breaker holds their work")


class DeliveryResult(BaseModel):
    delivered: int = 0
    failed: int = 0


class SupervisorInput(BaseModel):
    # A misspelt or foreign field is an error: the Supervisor must not start on someone else's input.
    model_config = ConfigDict(extra="forbid")

    sweeps_done: int = 0
    shard: int = 0
    interval_s: float | None = Field(default=None, description="Adaptive interval carried across continue-as-new")
    orphan_cursor: dict[str, str] = Field(default_factory=dict)
    backlog: dict[str, int] = Field(default_factory=dict)


class SweepStats(BaseModel):
    """What the ``stats`` query answers: for tests and operators."""

    sweeps: int = 0
    interval_s: float = 0.0
    last: ApplyResult | None = None
    orphans_found: int = 0
    queue_checks: int = 0
    breakers_holding: list[str] = Field(
        default_factory=list, description="Services whose breaker held their work at the last queue check"
    )
