"""``supervisor.apply``: carry out the workflow's decisions, each exactly once.

Before a decision that signals the Scheduler, Temporal is asked whether it still applies (the
mirror follows Temporal, never leads it). Each decision is then claimed with a compare-and-set
keyed (task, step, FailureCount, kind) and only after that sent, through the outbox
(``supervisor/outbox.py``).

A sweep's decisions are independent of each other (one task each, each claimed on its own row),
so they are carried out ``SAS_SUPERVISOR__CONCURRENCY`` at a time, and their signals sent the
same way: a sweep of a hundred decisions costs about a hundredth of their round trips over the
concurrency, not their sum (a hundred one after the other took twelve seconds).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import Client

from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import claim_decision, defer_step
from sas.state_store.queries import get_step, get_task_row
from sas.supervisor.activity_defs import ApplyDefs
from sas.supervisor.activity_support import CLEANUP_VERSION, bounded, shard_buckets
from sas.supervisor.alert_rows import alert_row, log_alert, log_decision
from sas.supervisor.breakers import holding, service_of_step
from sas.supervisor.metrics import record_decision, record_sweep
from sas.supervisor.models import SIGNALLED_KINDS, ApplyInput, ApplyResult, Decision
from sas.supervisor.outbox import Outbox
from sas.supervisor.outside_pauses import paused_outside_sas, record_outside_pause
from sas.supervisor.per_task import isolated
from sas.supervisor.reconcile import reconcile_task
from sas.supervisor.task_faults import TaskFault
from sas.supervisor.temporal_view import look, waiting_reason
from sas.task_models.breakers import BreakerView

log = logging.getLogger("sas.supervisor")


class ApplyActivities(ApplyDefs):
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

    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        result = ApplyResult()
        started = time.monotonic()
        held = await holding(self._sessions, datetime.now(UTC)) if request.decisions else {}

        async def one(decision: Decision) -> None:
            # One decision's failure (its task's query, a write refused) is alerted for its task;
            # the others are carried out all the same.
            outcome = await isolated(
                self._sessions, decision.task_id, "decision", partial(carry_out, decision), step=decision.step
            )
            if isinstance(outcome, TaskFault):
                result.failed += 1

        async def carry_out(decision: Decision) -> None:
            if await self._held_by_breaker(decision, held):
                result.held += 1
            elif decision.kind in SIGNALLED_KINDS and await self._temporal_says_wait(decision):
                result.deferred += 1
            elif await self._claim(decision):
                record_decision(decision.kind)
                result.claimed += 1
                result.alerts += decision.alert is not None
            else:
                result.skipped += 1

        await bounded(self._settings.supervisor.concurrency, [partial(one, d) for d in request.decisions])
        result.signalled = await self._outbox.flush(shard_buckets(self._settings, request.shard))
        record_sweep("apply", time.monotonic() - started)
        return result

    async def _held_by_breaker(self, d: Decision, held: dict[str, BreakerView]) -> bool:
        """A step of a service whose breaker holds its work: not failing but waiting, so no
        decision and nothing counted; it is looked at again when the breaker may probe."""
        if not held:
            return False
        async with self._sessions() as session:
            step = await get_step(session, d.task_id, d.step)
        service = service_of_step(step.agent) if step is not None else None
        view = held.get(service) if service else None
        if step is None or view is None:
            return False
        now = datetime.now(UTC)
        s = self._settings.supervisor
        until = max(view.retry_at or now, now + timedelta(seconds=max(s.interval_s, 1.0)))
        async with self._sessions() as session:
            await defer_step(session, d.task_id, d.step, d.seen_version, d.seen_failure_count, until)
        since = (view.outage_since or view.since or now).isoformat(timespec="seconds")
        log.info(
            "decision put off: the %s breaker holds its steps (open since %s)",
            service,
            since,
            extra={"fields": {"task_id": d.task_id, "step": d.step, "decision": d.kind, "service": service}},
        )
        return True

    async def _temporal_says_wait(self, d: Decision) -> bool:
        """Ask Temporal before escalating: True if this decision must not be taken now.

        A finished workflow gets no decision (its rows are reconciled instead); a closed or
        unknown one is the orphan check's; a step that waits for a worker, or a decision the
        workflow has not yet taken in, is not counted again - its look is only put off."""
        async with self._sessions() as session:
            task = await get_task_row(session, d.task_id)
            step = await get_step(session, d.task_id, d.step)
        if task is None or step is None or task.version >= CLEANUP_VERSION:
            return False  # a clean-up workflow is undoing it: its own ladder applies
        view = await look(self._client, d.task_id, task.chain_id, task.run_id)
        if view.status == "completed":
            found = await reconcile_task(self._sessions, self._client, d.task_id)
            log.info(
                "decision dropped: the workflow has completed; mirror reconciled",
                extra={
                    "fields": {"task_id": d.task_id, "decision": d.kind, "repairs": len(found.repairs) if found else 0}
                },
            )
            return True
        if view.status != "running":
            return True  # closed from outside or gone: check_orphans raises its alert
        s = self._settings.supervisor
        now = datetime.now(UTC)
        why = waiting_reason(view, (step.agent, step.compensation), now, s.overdue_grace_s)
        if why is None:
            return False
        pending = view.activity_for((step.agent, step.compensation))
        if pending is not None and paused_outside_sas(step, pending):
            await record_outside_pause(self._sessions, step, step.version, pending, now)
        waited = (now - view.workflow_task_scheduled).total_seconds() if view.workflow_task_scheduled else None
        if (
            view.workflow_task_pending
            and not view.workflow_task_started
            and waited is not None
            and waited < s.interval_s
        ):
            # Its workflow task was scheduled just now and waits for a busy worker: look again at the
            # next sweep (a refused order must not wait a whole queue check for a worker that is only
            # slow). One that has waited longer may have no worker at all: the queue check's case.
            until = now + timedelta(seconds=s.interval_s)
        else:
            # Look again after the queue check has had its say (a no-worker incident is its alert, not this step's).
            until = now + timedelta(seconds=max(s.queue_check_s, step.complete_by_s, s.interval_s))
        async with self._sessions() as session:
            await defer_step(session, d.task_id, d.step, d.seen_version, d.seen_failure_count, until)
        log.info(
            "decision put off: %s", why, extra={"fields": {"task_id": d.task_id, "step": d.step, "decision": d.kind}}
        )
        return True

    async def _claim(self, d: Decision) -> bool:
        now = datetime.now(UTC)
        row = tables.Decision(
            task_id=d.task_id,
            step=d.step,
            failure_count=d.failure_count,
            kind=d.kind,
            epoch=d.epoch,
            observed_state=d.observed_state,
            reason=d.reason,
            decided_by=self._identity,
            decided_at=now,
            # A wait is a note, not a message: nothing to send.
            signal_sent_at=None if d.kind in SIGNALLED_KINDS else now,
        )
        alert = alert_row(d.alert, d.task_id, d.step, d.failure_count, d.last_error, now) if d.alert else None
        async with self._sessions() as session:
            claimed = await claim_decision(session, row, d.seen_failure_count, d.seen_version, d.next_look_at, alert)
        if claimed:
            log_decision(d.task_id, d.step, d.kind, d.failure_count, d.reason)
            if d.alert is not None:
                log_alert(d.alert, d.task_id, d.step, d.failure_count, d.last_error)
        return claimed
