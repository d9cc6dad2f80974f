"""``supervisor.scan``: what a sweep has to look at - the steps due (failed, or past their
complete-by), the size of the decision outbox, and the alerts whose task has recovered. The
first shard's scan also brings the incidents up to date (``supervisor/alert/incident_check.py``) before
any decision is taken, so a decision's alert for a task in an incident is folded into it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity

from sas.settings import Settings
from sas.state_store.alerts import resolve_recovered, undelivered_alerts
from sas.state_store.decisions import undo_retries
from sas.state_store.queries import due_steps
from sas.state_store.rows import StepRow, TaskRow
from sas.supervisor.act import unsent
from sas.supervisor.activity_defs import ScanDefs
from sas.supervisor.activity_support import CLEANUP_VERSION, beat, policy_from_settings, shard_buckets
from sas.supervisor.alert import check_incidents
from sas.supervisor.metrics import StoreGauges, record_sweep
from sas.supervisor.models import DueStep, ScanInput, ScanResult, SupervisorPolicy
from sas.task_models import StepState


class ScanActivities(ScanDefs):
    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings) -> None:
        self._sessions = sessions
        self._settings = settings
        self._gauges = StoreGauges() if settings.metrics.supervisor_bind else None

    def policy(self) -> SupervisorPolicy:
        """The settings the workflow decides with, handed over with every scan (so recorded in history)."""
        return policy_from_settings(self._settings)

    @activity.defn(name="supervisor.scan")
    async def scan(self, request: ScanInput | None = None) -> ScanResult:
        """Due steps (one bounded index scan), the outbox's size, and alerts whose task recovered;
        with ``refusals_only``, the due steps refused for good and nothing else (a look between
        the chunks of a sweep's decisions, which must stay cheap)."""
        request = request or ScanInput()
        s = self._settings.supervisor
        now = datetime.now(UTC)
        started = time.monotonic()
        buckets = shard_buckets(self._settings, request.shard)
        if request.refusals_only:
            async with self._sessions() as session:
                return ScanResult(policy=self.policy(), due=await self._due_steps(session, now, buckets, True))
        incidents = None
        if request.shard == 0:
            incidents = await check_incidents(self._sessions, s.incident_min_tasks, now)
        async with self._sessions() as session:
            due = await self._due_steps(session, now, buckets, False)
            pending = len(await unsent(session, 1, buckets))
        async with self._sessions() as session:
            resolved = await resolve_recovered(session, now, buckets)
        undelivered = 0
        if s.webhook.url:
            async with self._sessions() as session:
                undelivered = len(await undelivered_alerts(session, now, 1))
        record_sweep("scan", time.monotonic() - started)
        if self._gauges is not None:
            async with self._sessions() as session:
                await self._gauges.refresh(session, timedelta(seconds=s.overdue_grace_s))
        return ScanResult(
            policy=self.policy(),
            due=due,
            unsent=pending,
            resolved=resolved + (incidents.resolved if incidents else 0),
            undelivered=undelivered,
            incidents=incidents.open if incidents else 0,
            incident_tasks=incidents.members if incidents else 0,
        )

    async def _due_steps(
        self, session: AsyncSession, now: datetime, buckets: tuple[int, int] | None, refusals_only: bool
    ) -> list[DueStep]:
        s = self._settings.supervisor
        grace = timedelta(seconds=s.overdue_grace_s)
        rows = await due_steps(session, now, grace, s.batch_size, buckets, refusals_only=refusals_only)
        due = []
        for step, task in rows:
            beat()
            if task.version >= CLEANUP_VERSION > step.version:
                continue  # a dead workflow's row: its clean-up workflow rewrites it
            undo = (
                await undo_retries(session, step.task_id, step.name)
                if step.state == StepState.COMPENSATION_FAILED
                else 0
            )
            due.append(self._due(step, task, undo))
        return due

    def _due(self, step: StepRow, task: TaskRow, undo: int) -> DueStep:
        ladder = self._settings.supervisor.ladder_for(task.task_type, step.name)
        return DueStep(
            task_id=step.task_id,
            task_type=task.task_type,
            workflow_type=task.workflow_type,
            task_queue=task.task_queue,
            step=step.name,
            state=step.state,
            failure_count=step.failure_count,
            resets=step.resets,
            version=step.version,
            complete_by=step.complete_by,
            complete_by_s=step.complete_by_s,
            locked_by=step.locked_by,
            last_error=step.last_error,
            error_type=step.error_type,
            permanent=step.permanent,
            updated_at=step.updated_at,
            undo_retries=undo,
            ladder=ladder,
            pivot="pivot" if step.pivot == "pivot" else "forward_only" if step.pivot == "forward_only" else None,
        )
