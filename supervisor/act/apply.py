"""``supervisor.apply``: carry out the workflow's decisions, each exactly once.

Before a decision that signals the Scheduler, its vetoes are asked whether it still applies: its
service's breaker, Temporal's view of its task (``supervisor/act/vetoes.py``). Each decision is
then claimed with a compare-and-set keyed (task, step, FailureCount, kind) and only after that
sent, through the outbox (``supervisor/act/outbox.py``).

A sweep's decisions are independent of each other (one task each, each claimed on its own row),
so they are carried out ``SAS_SUPERVISOR__CONCURRENCY`` at a time, and their signals sent the
same way: a sweep of a hundred decisions costs about a hundredth of their round trips over the
concurrency, not their sum (a hundred one after the other took twelve seconds).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import Client

from sas.runtime.task_faults import TaskFault
from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import claim_decision
from sas.supervisor.act.cooled_down import release_cooled_down
from sas.supervisor.act.outbox import Outbox
from sas.supervisor.act.vetoes import Vetoes
from sas.supervisor.activity_defs import ApplyDefs
from sas.supervisor.activity_support import bounded, shard_buckets
from sas.supervisor.alert import alert_row, log_alert, log_decision
from sas.supervisor.metrics import record_decision, record_sweep
from sas.supervisor.models import SIGNALLED_KINDS, ApplyInput, ApplyResult, Decision
from sas.supervisor.per_task import isolated


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
        self._settings = settings
        self._identity = identity
        self._outbox = outbox
        self._vetoes = Vetoes(sessions, client, settings)

    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        result = ApplyResult()
        started = time.monotonic()
        held = await self._vetoes.held_services() if request.decisions else {}

        async def one(decision: Decision) -> None:
            # One decision's failure (its task's query, a write refused) is alerted for its task;
            # the others are carried out all the same.
            outcome = await isolated(
                self._sessions, decision.task_id, "decision", partial(carry_out, decision), step=decision.step
            )
            if isinstance(outcome, TaskFault):
                result.failed += 1

        async def carry_out(decision: Decision) -> None:
            if await self._vetoes.held_by_breaker(decision, held):
                result.held += 1
            elif decision.kind in SIGNALLED_KINDS and await self._vetoes.temporal_says_wait(decision):
                result.deferred += 1
            elif await self._claim(decision):
                record_decision(decision.kind)
                result.claimed += 1
                result.alerts += decision.alert is not None
            else:
                result.skipped += 1

        # Before any is sent: a backlog of cool-downs that ended together goes in stages.
        await release_cooled_down(self._sessions, self._settings, request.decisions)
        await bounded(self._settings.supervisor.concurrency, [partial(one, d) for d in request.decisions])
        result.signalled = await self._outbox.flush(shard_buckets(self._settings, request.shard))
        record_sweep("apply", time.monotonic() - started)
        return result

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
