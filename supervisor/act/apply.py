"""``supervisor.apply``: carry out the workflow's decisions, each exactly once.

Before a decision that signals the Scheduler, Temporal is asked whether it still applies (the
mirror follows Temporal, never leads it). Each decision is then claimed with a compare-and-set
keyed (task, step, FailureCount, kind) and only after that sent, through the outbox
(``supervisor/act/outbox.py``).

A sweep's decisions are independent of each other (one task each, each claimed on its own row),
so they are carried out ``SAS_SUPERVISOR__CONCURRENCY`` at a time, and their signals sent the
same way: a sweep of a hundred decisions costs about a hundredth of their round trips over the
concurrency, not their sum (a hundred one after the other took twelve seconds).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import Client

from sas.breaker.held import holding, service_of_step
from sas.breaker.model import BreakerView
from sas.reconciliation.repairs import reconcile_task
from sas.reconciliation.temporal_view import look, waiting_reason
from sas.runtime.task_faults import TaskFault
from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import claim_decision, defer_step
from sas.state_store.queries import get_step, get_task_row
from sas.supervisor.act.outbox import Outbox
from sas.supervisor.act.outside_pauses import paused_outside_sas, record_outside_pause
from sas.supervisor.activity_defs import ApplyDefs
from sas.supervisor.activity_support import CLEANUP_VERSION, bounded, policy_from_settings, shard_buckets
from sas.supervisor.alert import alert_row, log_alert, log_decision
from sas.supervisor.decide import PutOff, breaker_holds, temporal_says_wait
from sas.supervisor.metrics import record_decision, record_sweep
from sas.supervisor.models import SIGNALLED_KINDS, ApplyInput, ApplyResult, Decision, SupervisorPolicy
from sas.supervisor.per_task import isolated

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
        """Whether the step's service's breaker holds the decision back (``policy.breaker_holds``)."""
        if not held:
            return False
        async with self._sessions() as session:
            step = await get_step(session, d.task_id, d.step)
        service = service_of_step(step.agent) if step is not None else None
        put_off = breaker_holds(held.get(service) if service else None, datetime.now(UTC), self._policy())
        return await self._put_off(d, put_off)

    async def _temporal_says_wait(self, d: Decision) -> bool:
        """Whether Temporal's view of the task holds the decision back (``policy.temporal_says_wait``):
        the facts are fetched here, judged there, and what it says is done here."""
        async with self._sessions() as session:
            task = await get_task_row(session, d.task_id)
            step = await get_step(session, d.task_id, d.step)
        if task is None or step is None or task.version >= CLEANUP_VERSION:
            return False  # a clean-up workflow is undoing it: its own ladder applies
        view = await look(self._client, d.task_id, task.chain_id, task.run_id)
        policy, now = self._policy(), datetime.now(UTC)
        names = (step.agent, step.compensation)
        waiting = waiting_reason(view, names, now, policy.overdue_grace_s) if view.status == "running" else None
        if waiting is not None:
            pending = view.activity_for(names)
            if pending is not None and paused_outside_sas(step, pending):
                await record_outside_pause(self._sessions, step, step.version, pending, now)
        scheduled = view.workflow_task_scheduled
        waited = (
            (now - scheduled).total_seconds()
            if view.workflow_task_pending and not view.workflow_task_started and scheduled
            else None
        )
        put_off = temporal_says_wait(view.status, waiting, waited, step.complete_by_s, now, policy)
        if put_off is not None and put_off.reconcile:
            await reconcile_task(self._sessions, self._client, d.task_id)
        return await self._put_off(d, put_off)

    async def _put_off(self, d: Decision, put_off: PutOff | None) -> bool:
        """Do what a veto says: move the step's next look, and say so. Whether there was one."""
        if put_off is None:
            return False
        if put_off.look_again_at is not None:
            async with self._sessions() as session:
                await defer_step(
                    session, d.task_id, d.step, d.seen_version, d.seen_failure_count, put_off.look_again_at
                )
        log.info(
            "decision put off: %s",
            put_off.why,
            extra={"fields": {"task_id": d.task_id, "step": d.step, "decision": d.kind}},
        )
        return True

    def _policy(self) -> SupervisorPolicy:
        return policy_from_settings(self._settings)

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
