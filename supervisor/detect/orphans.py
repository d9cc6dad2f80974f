"""``supervisor.check_orphans``: tasks the mirror says are open, looked up in Temporal: those
whose workflow Temporal closed since the last look first (``closed``), then the quiet ones in turn.

- closed from outside (terminated, failed, timed out, cancelled): marked for a clean-up
  workflow that undoes what was done, with a critical alert;
- gone from Temporal (history expired, namespace reset): one alert, nothing undone on the
  mirror's word;
- running but stuck, its workflow task failing again and again: one alert;
- running with a fan-out item paused with Temporal's own tools in one of its batches: the step
  is parked as Error with its alert (``outside_pauses``), seen so before the fan-out's own
  complete-by (which may be long) has passed;
- completed: its rows are reconciled with what Temporal says;

and tasks the mirror says are finished whose steps are still open (a write lost while the
task finished) are reconciled too (``finished.reconcile_finished``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import Client

from sas.reconciliation.repairs import reconcile_task
from sas.reconciliation.temporal_view import STUCK_WORKFLOW_TASK_ATTEMPTS, look
from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import claim_cleanup
from sas.state_store.pivots import past_point_of_no_return
from sas.state_store.queries import OPEN_TASK_STATES, get_task, stale_tasks
from sas.state_store.rows import TaskRow
from sas.supervisor.act import Outbox, outside_pauses_in
from sas.supervisor.activity_defs import OrphanDefs
from sas.supervisor.activity_support import CLEANUP_VERSION, beat, shard_buckets
from sas.supervisor.alert import alert_row, log_alert, log_decision, raise_once
from sas.supervisor.decide import Closed, closed_from_outside, history_gone, workflow_stuck
from sas.supervisor.detect.closed import ClosedFollower
from sas.supervisor.detect.finished import reconcile_finished
from sas.supervisor.detect.resets import ResetFollower
from sas.supervisor.models import OrphanCheckInput, OrphanCheckResult
from sas.supervisor.per_task import isolated
from sas.task_models.pauses import is_paused
from sas.workflows.cleanup import UNDO_STATES


class OrphanActivities(OrphanDefs):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client: Client,
        settings: Settings,
        identity: str,
        outbox: Outbox,
    ) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings
        self._identity = identity
        self._outbox = outbox
        self._resets = ResetFollower(sessions, client, settings.temporal.task_queue)
        self._closed = ClosedFollower(client, settings.temporal.task_queue)

    @activity.defn(name="supervisor.check_orphans")
    async def check_orphans(self, request: OrphanCheckInput) -> OrphanCheckResult:
        """Tasks the mirror says are open whose workflow was closed from outside: mark
        them Error, alert, and record a clean-up decision (started through the outbox)."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        before = now - timedelta(seconds=s.orphan_after_s)
        buckets = shard_buckets(self._settings, request.shard)
        result = OrphanCheckResult(cursor=dict(request.cursor))
        # First the workflows Temporal closed since the last look (terminated from the UI, say),
        # once quiet: their turn among every quiet open task could be hours away. Their own budget.
        await self._closed.look()
        for task in await self._closed.take(self._sessions, buckets, s.orphan_batch, before):
            beat()
            result.checked += 1
            if task.version < CLEANUP_VERSION:
                await isolated(
                    self._sessions,
                    task.task_id,
                    "orphan check",
                    partial(self._check, task, now, result),
                    step=task.current_step,
                )
        budget = s.orphan_batch
        for state in OPEN_TASK_STATES:
            if budget <= 0:
                break
            after = _parse_cursor(request.cursor.get(state))
            async with self._sessions() as session:
                tasks = await stale_tasks(session, state, before, budget, after, buckets)
            budget -= len(tasks)
            # Resume after the last one next time; start over once the range is done.
            if len(tasks) == s.orphan_batch or (tasks and budget <= 0):
                result.cursor[state] = f"{tasks[-1].updated_at.isoformat()}|{tasks[-1].task_id}"
            else:
                result.cursor.pop(state, None)
            for task in tasks:
                beat()
                result.checked += 1
                if task.version >= CLEANUP_VERSION:
                    continue  # already being cleaned up
                # One task's failure (a status query no worker can answer, an answer too large) is
                # alerted for that task; the check goes on with the others.
                await isolated(
                    self._sessions,
                    task.task_id,
                    "orphan check",
                    partial(self._check, task, now, result),
                    step=task.current_step,
                )
        # Finished tasks too: one may have finished while a write of its steps was lost. Their own
        # budget: the open tasks (a long wait step's among them) must not starve them.
        asked, repaired = await reconcile_finished(
            self._sessions, self._client, result.cursor, before, s.orphan_batch, buckets
        )
        result.checked += asked
        result.repaired += repaired
        # A reset's new run that wrote nothing the rows do not hold: the mirror follows it too.
        result.repaired += await self._resets.follow(buckets)
        if result.orphans:
            await self._outbox.flush(buckets)
        return result

    async def _check(self, task: TaskRow, now: datetime, result: OrphanCheckResult) -> None:
        """One quiet task: closed from outside (a clean-up is claimed, unless past its pivot), or
        reconciled."""
        how = await self._closed_how(task, now)
        if how is None:
            found = await reconcile_task(self._sessions, self._client, task.task_id)
            result.repaired += len(found.repairs) if found else 0
            return
        async with self._sessions() as session:
            record = await get_task(session, task.task_id)
        steps = record.steps if record is not None else []
        done = [s.name for s in steps if s.state in UNDO_STATES]
        closed = closed_from_outside(task.task_id, task.state, how, past_point_of_no_return(steps), done)
        if not closed.undo:
            key = f"closed_past_pivot:{task.task_id}"
            await raise_once(self._sessions, closed.alert, key, now, task_id=task.task_id)
        elif await self._claim_cleanup(task, closed, now):
            result.orphans.append(task.task_id)

    async def _closed_how(self, task: TaskRow, now: datetime) -> str | None:
        """How the task's workflow was closed from outside, or None if it was not (running,
        completed - then reconciled - or unknown to Temporal, which only raises an alert)."""
        view = await look(self._client, task.task_id, task.chain_id, task.run_id)
        if view.status == "gone":
            await self._history_gone(task, now)
            return None
        if view.status == "running" and view.description is not None:
            await self._check_stuck(task, view.description, now)
            if any(is_paused(a) for items in view.batches.values() for a in items):
                async with self._sessions() as session:
                    record = await get_task(session, task.task_id)
                await outside_pauses_in(self._sessions, view, record.steps if record else [], now)
        return view.how if view.status == "closed" else None

    async def _history_gone(self, task: TaskRow, now: datetime) -> None:
        spec = history_gone(task.task_id, task.state)
        key = f"history_gone:{task.task_id}"
        await raise_once(self._sessions, spec, key, now, task_id=task.task_id, step=task.current_step)

    async def _check_stuck(self, task: TaskRow, described: Any, now: datetime) -> None:
        attempt = described.raw_description.pending_workflow_task.attempt
        spec = workflow_stuck(task.task_id, attempt, STUCK_WORKFLOW_TASK_ATTEMPTS)
        if spec is None:
            return
        key = f"workflow_stuck:{task.task_id}"
        await raise_once(
            self._sessions, spec, key, now, task_id=task.task_id, step=task.current_step, failure_count=attempt
        )

    async def _claim_cleanup(self, task: TaskRow, closed: Closed, now: datetime) -> bool:
        decision = tables.Decision(
            task_id=task.task_id,
            step="-",
            failure_count=0,
            kind="cleanup",
            observed_state=task.state,
            reason=closed.reason,
            decided_by=self._identity,
            decided_at=now,
            signal_sent_at=None,
        )
        alert = alert_row(closed.alert, task.task_id, "-", 0, None, now)
        async with self._sessions() as session:
            claimed = await claim_cleanup(session, decision, task.state, task.version, CLEANUP_VERSION, alert)
        if claimed:
            log_decision(task.task_id, "-", "cleanup", 0, closed.reason)
            log_alert(closed.alert, task.task_id, "-", 0, None)
        return claimed


def _parse_cursor(raw: str | None) -> tuple[datetime, str] | None:
    if not raw:
        return None
    when, _, task_id = raw.partition("|")
    return datetime.fromisoformat(when), task_id
