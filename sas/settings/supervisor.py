"""The Supervisor: its sweeps, its escalation ladder (``sas.task_models.ladder``) and the alert webhook."""

from __future__ import annotations

import zlib

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from sas.settings.checks import standard_webhooks_secret
from sas.task_models.ladder import Ladder


class TaskLadder(Ladder):
    """A task type's ladder, with optional per-step overrides: SAS_SUPERVISOR__LADDERS__ORDER__STEPS__SHIP__RETRIES=5.
    A field left unset is the task type's, else the default ladder's."""

    steps: dict[str, Ladder] = Field(
        default_factory=dict,
        description="Per-step overrides within the task type, keyed by step name; a field left unset is the task type's.",
    )


class WebhookSettings(BaseModel):
    """The alert webhook: every new or escalated alert as a signed JSON POST (docs/webhooks.md)."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a rejected secret is not printed

    url: str | None = Field(
        default=None,
        description="POST every new or escalated alert here as JSON; off if unset. Checked against SAS_OUTBOUND__*.",
    )
    secret: SecretStr | None = Field(
        default=None,
        description="Standard Webhooks secret (whsec_<base64>): signs each delivery (webhook-signature).",
    )
    timeout_s: float = Field(default=5.0, gt=0, description="Timeout of one delivery.")
    max_attempts: int = Field(default=8, ge=1, description="Deliveries tried per alert before it is given up (logged).")
    retry_delay_s: float = Field(default=2.0, gt=0, description="First wait between deliveries; doubles each time.")

    _secret_form = field_validator("secret")(standard_webhooks_secret)


class SupervisorSettings(Ladder):
    """The Supervisor: its sweeps, the default escalation ladder (the ``Ladder`` fields) and what it watches.

    The default ladder retries after 1 s and 2 s (FailureCount 1 and 2), makes three cool-down
    tries 5 minutes apart (3 to 5), which waits out a 10-minute outage of a remote service, then
    compensates at FailureCount 6; a permanent fault goes straight to the outcome."""

    interval_s: float = Field(default=5.0, gt=0, description="Time between sweeps while there is work.")
    max_interval_s: float = Field(
        default=60.0, gt=0, description="Idle sweeps back off towards this; a failure (wake signal) or work resets it."
    )
    idle_backoff: float = Field(default=2.0, ge=1.0, description="Factor the interval grows by after an empty sweep.")
    failure_threshold: int = Field(
        default=3, ge=1, description="FailureCount at which the default ladder acts (retries = threshold - 1)."
    )
    ladders: dict[str, TaskLadder] = Field(
        default_factory=dict,
        description="Per task type (and step) ladders: SAS_SUPERVISOR__LADDERS__ORDER__COOLDOWN_S=30.",
    )
    overdue_grace_s: float = Field(
        default=3.0, ge=0, description="How long past CompleteBy a Processing step may be before it counts."
    )
    batch_size: int = Field(default=100, ge=1, description="Most due steps handled per sweep.")
    sweeps_per_run: int = Field(default=200, ge=1, description="Sweeps before continue-as-new.")
    workflow_id: str = Field(
        default="sas-supervisor",
        description="Fixed id: Temporal runs one at a time (per shard; -<shard> is appended when sharded).",
    )
    shards: int = Field(
        default=1, ge=1, le=4096, description="S: Supervisor workflows, each owning a hash range of task ids."
    )
    keep_running_s: float = Field(
        default=15.0,
        gt=0,
        le=3600,
        description="How often each Supervisor worker checks that every shard's Supervisor workflow runs,"
        " and starts a closed one again.",
    )
    sweep_bound_s: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="`sas health supervisor` fails when a shard has not swept for this long;"
        " max_interval_s + 90 s if unset (a sweep's own time and a slow round trip).",
    )
    orphan_after_s: float = Field(
        default=30.0,
        ge=0,
        description="A non-terminal task untouched this long is checked against Temporal (detection d).",
    )
    orphan_batch: int = Field(default=50, ge=1, description="Most tasks checked against Temporal per check.")
    orphan_check_s: float = Field(default=15.0, ge=0, description="How often tasks are checked against Temporal (d).")
    queue_check_s: float = Field(
        default=15.0, ge=0, description="How often task queues are asked for pollers and backlog (detection c)."
    )
    queue_idle_after_s: float = Field(
        default=10.0, ge=0, description="A Pending/Processing step this old on a queue with no poller raises an alert."
    )
    poller_stale_s: float = Field(
        default=120.0,
        gt=0,
        description="A poller Temporal last saw longer ago than this is gone (workers long-poll for up to ~60 s,"
        " so keep it well above that).",
    )
    concurrency: int = Field(
        default=16,
        ge=1,
        le=256,
        description="Decisions a sweep carries out at once (each asks Temporal, claims its row, sends its signal).",
    )
    incident_min_tasks: int = Field(
        default=5,
        ge=2,
        description="Tasks failing for one cause (service, step, error) that make one incident, their alerts folded in.",
    )
    webhook: WebhookSettings = WebhookSettings()

    def shard_workflow_id(self, shard: int) -> str:
        """One Supervisor workflow id per shard; the plain id when there is one shard."""
        return self.workflow_id if self.shards == 1 else f"{self.workflow_id}-{shard}"

    def workflow_id_for_task(self, task_id: str) -> str:
        """The Supervisor workflow that owns ``task_id`` (the one its Scheduler wakes)."""
        bucket = zlib.crc32(task_id.encode()) % 4096  # = state_store.tables.shard_of
        return self.shard_workflow_id(self.shard_for_bucket(bucket))

    def shard_for_bucket(self, bucket: int, buckets: int = 4096) -> int:
        """The shard owning a task's hash bucket (``state_store.tables.shard_of``): contiguous ranges."""
        return bucket * self.shards // buckets

    def bucket_range(self, shard: int, buckets: int = 4096) -> tuple[int, int]:
        """[lo, hi) of the hash buckets shard ``shard`` scans."""
        lo = -(-shard * buckets // self.shards)
        hi = -(-(shard + 1) * buckets // self.shards)
        return lo, hi

    def ladder_for(self, task_type: str, step: str) -> Ladder:
        """The resolved ladder of one step: per-step override, else task type, else the defaults above."""
        defaults = self.resolved()
        if "retries" not in self.model_fields_set:
            defaults = defaults.model_copy(update={"retries": self.failure_threshold - 1})
        task = self.ladders.get(task_type)
        return defaults.overlaid(task, task.steps.get(step) if task else None)
