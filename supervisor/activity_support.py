"""What every Supervisor activity class shares: its heartbeat, its shard's slice of the
state store, the version from which a task's rows belong to its clean-up workflow, and a
bounded way to do many independent things at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import activity

from sas.settings import Settings
from sas.supervisor.models import SupervisorPolicy
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


async def bounded(limit: int, jobs: list[Callable[[], Awaitable[None]]]) -> None:
    """Run ``jobs`` at most ``limit`` at a time, heartbeating as each starts. The first failure
    is raised once the others have ended (the activity is retried; every job is idempotent)."""
    gate = asyncio.Semaphore(max(limit, 1))

    async def run(job: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            beat()
            await job()

    for outcome in await asyncio.gather(*(run(job) for job in jobs), return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


def policy_from_settings(settings: Settings) -> SupervisorPolicy:
    """The thresholds in force, from the Supervisor worker's settings (read at each sweep)."""
    s = settings.supervisor
    return SupervisorPolicy(
        failure_threshold=s.failure_threshold,
        overdue_grace_s=s.overdue_grace_s,
        batch_size=s.batch_size,
        interval_s=s.interval_s,
        max_interval_s=max(s.max_interval_s, s.interval_s),
        idle_backoff=s.idle_backoff,
        sweeps_per_run=s.sweeps_per_run,
        queue_check_s=s.queue_check_s,
        orphan_check_s=s.orphan_check_s,
        shards=s.shards,
        webhook=bool(s.webhook.url),
        # Two rounds of the concurrent decisions: a refusal waits for one chunk at most, not a batch.
        apply_chunk=2 * s.concurrency,
    )
