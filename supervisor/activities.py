"""The Supervisor's hands: scan the state store, and carry out decisions exactly once.

``apply`` claims each decision with a compare-and-set keyed (task, step,
FailureCount) and only then signals the Scheduler, through an outbox: a sweep
that dies between the two is completed by the next, and a signal sent twice is
ignored by the Scheduler (it carries the FailureCount).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from settings import Settings
from state_store import tables
from state_store.decisions import claim_decision, mark_sent, unsent_decisions
from state_store.queries import due_steps
from supervisor.models import ApplyResult, Decision, DueStep, ScanResult, SupervisorPolicy
from task_models import OperatorRequest

log = logging.getLogger("sas.supervisor")


class SupervisorActivities:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, settings: Settings, identity: str) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings
        self._identity = identity

    @activity.defn(name="supervisor.scan")
    async def scan(self) -> ScanResult:
        s = self._settings.supervisor
        policy = SupervisorPolicy(
            failure_threshold=s.failure_threshold,
            overdue_grace_s=s.overdue_grace_s,
            batch_size=s.batch_size,
            interval_s=s.interval_s,
            sweeps_per_run=s.sweeps_per_run,
        )
        async with self._sessions() as session:
            rows = await due_steps(session, datetime.now(UTC), timedelta(seconds=s.overdue_grace_s), s.batch_size)
            unsent = len(await unsent_decisions(session, 1))
        return ScanResult(policy=policy, due=[_due(step, task) for step, task in rows], unsent=unsent)

    @activity.defn(name="supervisor.apply")
    async def apply(self, decisions: list[Decision]) -> ApplyResult:
        result = ApplyResult()
        for decision in decisions:
            if await self._claim(decision):
                result.claimed += 1
                result.alerts += decision.alert is not None
            else:
                result.skipped += 1
        result.signalled = await self._flush_outbox()
        return result

    async def _claim(self, d: Decision) -> bool:
        now = datetime.now(UTC)
        row = tables.Decision(
            task_id=d.task_id,
            step=d.step,
            failure_count=d.failure_count,
            kind=d.kind,
            observed_state=d.observed_state,
            reason=d.reason,
            decided_by=self._identity,
            decided_at=now,
            signal_sent_at=None,
        )
        alert = None
        if d.alert is not None:
            alert = tables.Alert(
                incident_key=f"{d.alert.kind}:{d.task_id}:{d.step}",
                severity=d.alert.severity,
                kind=d.alert.kind,
                task_id=d.task_id,
                step=d.step,
                failure_count=d.failure_count,
                message=d.alert.message,
                last_error=d.last_error,
                suggested_action=d.alert.suggested_action,
                status="open",
                created_at=now,
                updated_at=now,
            )
        async with self._sessions() as session:
            claimed = await claim_decision(session, row, d.seen_failure_count, d.seen_version, d.next_look_at, alert)
        if claimed:
            log.info(
                "decision",
                extra={"fields": {"task_id": d.task_id, "step": d.step, "decision": d.kind, "failure_count": d.failure_count, "reason": d.reason}},
            )
            if d.alert is not None:
                log.warning(
                    "alert",
                    extra={"fields": {"severity": d.alert.severity, "kind": d.alert.kind, "task_id": d.task_id, "step": d.step,
                                      "failure_count": d.failure_count, "message": d.alert.message, "last_error": d.last_error,
                                      "suggested_action": d.alert.suggested_action}},
                )
        return claimed

    async def _flush_outbox(self) -> int:
        sent = 0
        async with self._sessions() as session:
            pending = await unsent_decisions(session, 500)
        for d in pending:
            request = OperatorRequest(
                step=d.step, failure_count=d.failure_count, decision_id=str(d.id), by="supervisor", reason=d.reason[:2000]
            )
            try:
                await self._client.get_workflow_handle(d.task_id).signal(d.kind, request)
                sent += 1
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise  # Temporal unreachable: retried with the activity, outbox intact
                # The workflow has ended; nobody is left to act on this decision.
                log.warning("decision for a closed workflow dropped", extra={"fields": {"task_id": d.task_id, "decision": d.kind}})
            async with self._sessions() as session:
                await mark_sent(session, d.id, datetime.now(UTC))
        return sent


def _due(step: tables.Step, task: tables.Task) -> DueStep:
    return DueStep(
        task_id=step.task_id,
        task_type=task.task_type,
        workflow_type=task.workflow_type,
        task_queue=task.task_queue,
        step=step.name,
        state=step.state,
        failure_count=step.failure_count,
        version=step.version,
        complete_by=step.complete_by,
        complete_by_s=step.complete_by_s,
        locked_by=step.locked_by,
        last_error=step.last_error,
        error_type=step.error_type,
        permanent=step.permanent,
    )
