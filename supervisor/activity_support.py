"""What every Supervisor activity class shares: its heartbeat, its shard's slice of the
state store, and the version from which a task's rows belong to its clean-up workflow."""

from __future__ import annotations

from temporalio import activity

from sas.settings import Settings
from sas.task_models.cleanup import CLEANUP_SEQ
from sas.task_models.versions import version_of

# Rows at or above this version are written by a clean-up workflow (workflows/cleanup.py), whose
# own ladder applies: the Supervisor's scan, decisions and orphan check leave them alone.
CLEANUP_VERSION = version_of(CLEANUP_SEQ)


def beat() -> None:
    """Tell Temporal this Supervisor is alive (a killed one is then replaced within seconds)."""
    if activity.in_activity():
        activity.heartbeat()


def shard_buckets(settings: Settings, shard: int) -> tuple[int, int] | None:
    """The hash buckets ``shard`` looks after, or None when one Supervisor looks after all."""
    s = settings.supervisor
    return None if s.shards == 1 else s.bucket_range(shard)
