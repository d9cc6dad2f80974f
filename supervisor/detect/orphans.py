"""``supervisor.check_orphans``: tasks the mirror says are open, looked up in Temporal.

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
task finished) are reconciled too (``reconcile.reconcile_finished``).
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
from sas.supervisor.detect.resets import ResetFollower
from sas.supervisor.models import AlertSpec, OrphanCheckInput, OrphanCheckResult
from sas.supervisor.per_task import isolated
from sas.supervisor.reconcile import reconcile_finished
from sas.task_models.ids import cleanup_workflow_id
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

    @activity.defn(name="supervisor.check_orphans")
    async def check_orphans(self, request: OrphanCheckInput) -> OrphanCheckResult:
        """Tasks the mirror says are open whose workflow was closed from outside: mark
        them Error, alert, and record a clean-up decision (started through the outbox)."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        before = now - timedelta(seconds=s.orphan_after_s)
        buckets = shard_buckets(self._settings, request.shard)
        result = OrphanCheckResult(cursor=dict(request.cursor))
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
        """One quiet task: closed from outside (a clean-up is claimed), or reconciled."""
        closed = await self._closed_how(task, now)
        if closed is not None and await self._past_pivot(task, closed, now):
            return  # never undone: an operator's (one alert)
        if closed is not None and await self._claim_cleanup(task, closed, now):
            result.orphans.append(task.task_id)
        elif closed is None:
            found = await reconcile_task(self._sessions, self._client, task.task_id)
            result.repaired += len(found.repairs) if found else 0

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

    async def _past_pivot(self, task: TaskRow, closed: str, now: datetime) -> bool:
        """A task closed from outside past its point of no return is not cleaned up (that would
        undo what must only go forward): one critical alert says so. Whether it was."""
        async with self._sessions() as session:
            record = await get_task(session, task.task_id)
        past = past_point_of_no_return(record.steps) if record is not None else None
        if past is None:
            return False
        spec = AlertSpec(
            severity="critical",
            kind="closed_past_pivot",
            message=(
                f"task {task.task_id}: its workflow was {closed} from outside past its point of no return ({past});"
                " nothing was undone"
            ),
            suggested_action=(
                f"finish it by hand (`sas show {task.task_id}`: what was done), or resubmit it "
                f"(`sas resubmit {task.task_id} --reason ...`); then `sas alerts resolve`"
            ),
        )
        await raise_once(self._sessions, spec, f"closed_past_pivot:{task.task_id}", now, task_id=task.task_id)
        return True

    async def _history_gone(self, task: TaskRow, now: datetime) -> None:
        """Temporal no longer knows the workflow (retention, a namespace reset). Its history was
        the only proof of what it did, so nothing is undone on the mirror's word: one alert."""
        spec = AlertSpec(
            severity="critical",
            kind="history_gone",
            message=(
                f"task {task.task_id}: Temporal no longer knows its workflow (history expired or the namespace was "
                f"reset) while the mirror says {task.state}; nothing was undone"
            ),
            suggested_action=(
                f"check the remote services' records for {task.task_id} (`sas show {task.task_id}`); "
                "undo by hand what must be undone, then `sas alerts resolve`"
            ),
        )
        key = f"history_gone:{task.task_id}"
        await raise_once(self._sessions, spec, key, now, task_id=task.task_id, step=task.current_step)

    async def _check_stuck(self, task: TaskRow, described: Any, now: datetime) -> None:
        """A running workflow whose workflow task keeps failing cannot act on any signal - the
        ladder is no use. Usually deployed code no longer matches its history (non-determinism).
        Say so, once, to an operator."""
        attempt = described.raw_description.pending_workflow_task.attempt
        if attempt < STUCK_WORKFLOW_TASK_ATTEMPTS:
            return
        spec = AlertSpec(
            severity="critical",
            kind="workflow_stuck",
            message=(
                f"task {task.task_id}: its workflow task keeps failing (attempt {attempt}), so it cannot make progress "
                "(usually new workflow code that does not match its history: a non-determinism error)"
            ),
            suggested_action=(
                "see the WorkflowTaskFailed event in the Temporal UI; deploy the previous worker version, or fix the "
                "change with workflow.patched (docs/replay.md), or reset the workflow to an earlier event"
            ),
        )
        key = f"workflow_stuck:{task.task_id}"
        await raise_once(
            self._sessions, spec, key, now, task_id=task.task_id, step=task.current_step, failure_count=attempt
        )

    async def _claim_cleanup(self, task: TaskRow, closed: str, now: datetime) -> bool:
        async with self._sessions() as session:
            record = await get_task(session, task.task_id)
        done = [s.name for s in (record.steps if record else []) if s.state in UNDO_STATES]
        reason = (
            f"workflow {closed} while the mirror says {task.state}; "
            f"undoing {', '.join(done) or 'nothing'} in {cleanup_workflow_id(task.task_id)}"
        )
        decision = tables.Decision(
            task_id=task.task_id,
            step="-",
            failure_count=0,
            kind="cleanup",
            observed_state=task.state,
            reason=reason,
            decided_by=self._identity,
            decided_at=now,
            signal_sent_at=None,
        )
        spec = AlertSpec(
            severity="critical",
            kind="workflow_closed",
            message=f"task {task.task_id}: its workflow was {closed} from outside while the mirror said {task.state}",
            suggested_action=(
                f"completed steps ({', '.join(done) or 'none'}) are being undone by {cleanup_workflow_id(task.task_id)}; "
                "find out who closed it; resubmit under a new id if the customer still wants it"
            ),
        )
        alert = alert_row(spec, task.task_id, "-", 0, None, now)
        async with self._sessions() as session:
            claimed = await claim_cleanup(session, decision, task.state, task.version, CLEANUP_VERSION, alert)
        if claimed:
            log_decision(task.task_id, "-", "cleanup", 0, reason)
            log_alert(spec, task.task_id, "-", 0, None)
        return claimed


def _parse_cursor(raw: str | None) -> tuple[datetime, str] | None:
    if not raw:
        return None
    when, _, task_id = raw.partition("|")
    return datetime.fromisoformat(when), task_id
