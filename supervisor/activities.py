"""The Supervisor's hands: scan the state store, ask Temporal, and carry out decisions exactly once.

``apply`` claims each decision with a compare-and-set keyed (task, step,
FailureCount, kind) and only then signals the Scheduler, through an outbox: a
sweep that dies between the two is completed by the next, and a signal sent
twice is ignored by the Scheduler (it carries the FailureCount).
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.outbound import WebhookSender
from settings import Settings
from state_store import tables
from state_store.alerts import (
    active_alert,
    active_alerts_of_kind,
    claim_delivery,
    raise_alert,
    record_delivery,
    resolve_alert,
    resolve_recovered,
    undelivered_alerts,
)
from state_store.decisions import claim_cleanup, claim_decision, defer_step, mark_sent, undo_retries
from state_store.queries import OPEN_TASK_STATES, due_steps, get_task, stale_tasks, waiting_tasks_by_queue
from supervisor.metrics import StoreGauges, record_backlog, record_decision, record_sweep
from supervisor.models import (
    CLEANUP_SEQ,
    SIGNALLED_KINDS,
    AlertSpec,
    ApplyInput,
    ApplyResult,
    CleanupInput,
    CleanupStep,
    Decision,
    DeliveryResult,
    DueStep,
    Ladder,
    OrphanCheckInput,
    OrphanCheckResult,
    QueueCheckInput,
    QueueCheckResult,
    ScanInput,
    ScanResult,
    SupervisorPolicy,
)
from supervisor.reconcile import reconcile_task
from supervisor.temporal_view import look, waiting_reason
from task_models import OperatorRequest
from task_models.versions import version_of

log = logging.getLogger("sas.supervisor")

_CLEANUP_VERSION = version_of(CLEANUP_SEQ)
_KIND_NAMES = {TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW: "workflow", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY: "activity"}


# A quiet task (see orphan_after_s) whose workflow task is on its second attempt or later has
# had a workflow task fail and be retried without success since: not a passing fault.
_STUCK_AFTER_ATTEMPTS = 2


def _beat() -> None:
    """Tell Temporal this Supervisor is alive (a killed one is then replaced within seconds)."""
    if activity.in_activity():
        activity.heartbeat()


def cleanup_workflow_id(task_id: str) -> str:
    return f"cleanup-{task_id}"


class SupervisorActivities:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        client: Client,
        settings: Settings,
        identity: str,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings
        self._identity = identity
        self._http = http
        self._gauges = StoreGauges() if settings.metrics.supervisor_bind else None

    # ------------------------------------------------------------- scan

    def policy(self) -> SupervisorPolicy:
        s = self._settings.supervisor
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
        )

    def _range(self, shard: int) -> tuple[int, int] | None:
        s = self._settings.supervisor
        return None if s.shards == 1 else s.bucket_range(shard)

    @activity.defn(name="supervisor.scan")
    async def scan(self, request: ScanInput | None = None) -> ScanResult:
        """Due steps (one bounded index scan), the outbox's size, and alerts whose task recovered."""
        request = request or ScanInput()
        s = self._settings.supervisor
        now = datetime.now(UTC)
        started = time.monotonic()
        buckets = self._range(request.shard)
        async with self._sessions() as session:
            rows = await due_steps(session, now, timedelta(seconds=s.overdue_grace_s), s.batch_size, buckets)
            due = []
            for step, task in rows:
                _beat()
                if task.version >= _CLEANUP_VERSION > step.version:
                    continue  # a dead workflow's row: its clean-up workflow rewrites it
                undo = await undo_retries(session, step.task_id, step.name) if step.state == "CompensationFailed" else 0
                due.append(self._due(step, task, undo))
            unsent = await self._unsent_count(session, buckets)
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
        return ScanResult(policy=self.policy(), due=due, unsent=unsent, resolved=resolved, undelivered=undelivered)

    def _due(self, step: tables.Step, task: tables.Task, undo: int) -> DueStep:
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
            ladder=Ladder(**ladder.model_dump()),
        )

    async def _unsent_count(self, session: AsyncSession, buckets: tuple[int, int] | None) -> int:
        return len(await _unsent(session, 1, buckets))

    # ------------------------------------------------------------ apply

    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        result = ApplyResult()
        started = time.monotonic()
        for decision in request.decisions:
            _beat()
            if decision.kind in SIGNALLED_KINDS and await self._temporal_says_wait(decision):
                result.deferred += 1
                continue
            if await self._claim(decision):
                record_decision(decision.kind)
                result.claimed += 1
                result.alerts += decision.alert is not None
            else:
                result.skipped += 1
        result.signalled = await self._flush_outbox(self._range(request.shard))
        record_sweep("apply", time.monotonic() - started)
        return result

    async def _temporal_says_wait(self, d: Decision) -> bool:
        """Ask Temporal before escalating: True if this decision must not be taken now.

        A finished workflow gets no decision (its rows are reconciled instead); a closed or
        unknown one is the orphan check's; a step that waits for a worker, or a decision the
        workflow has not yet taken in, is not counted again - its look is only put off."""
        async with self._sessions() as session:
            task = await session.get(tables.Task, d.task_id)
            step = await session.get(tables.Step, (d.task_id, d.step))
        if task is None or step is None or task.version >= _CLEANUP_VERSION:
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
        alert = _alert_row(d.alert, d.task_id, d.step, d.failure_count, d.last_error, now) if d.alert else None
        async with self._sessions() as session:
            claimed = await claim_decision(session, row, d.seen_failure_count, d.seen_version, d.next_look_at, alert)
        if claimed:
            _log_decision(d.task_id, d.step, d.kind, d.failure_count, d.reason)
            if d.alert is not None:
                _log_alert(d.alert, d.task_id, d.step, d.failure_count, d.last_error)
        return claimed

    async def _flush_outbox(self, buckets: tuple[int, int] | None) -> int:
        sent = 0
        async with self._sessions() as session:
            pending = await _unsent(session, 500, buckets)
        for d in pending:
            _beat()
            if d.kind == "cleanup":
                await self._start_cleanup(d)
            elif await self._signal(d):
                sent += 1
            async with self._sessions() as session:
                await mark_sent(session, d.id, datetime.now(UTC))
        return sent

    async def _signal(self, d: tables.Decision) -> bool:
        request = OperatorRequest(
            step=d.step, failure_count=d.failure_count, decision_id=str(d.id), by="supervisor", reason=d.reason[:2000]
        )
        # The task's own workflow; if it has ended, the clean-up workflow undoing it.
        for workflow_id in (d.task_id, cleanup_workflow_id(d.task_id)):
            try:
                await self._client.get_workflow_handle(workflow_id).signal(d.kind, request)
                return True
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise  # Temporal unreachable: retried with the activity, outbox intact
        # Nobody is left to act on this decision.
        log.warning(
            "decision for a closed workflow dropped", extra={"fields": {"task_id": d.task_id, "decision": d.kind}}
        )
        return False

    async def _start_cleanup(self, d: tables.Decision) -> None:
        async with self._sessions() as session:
            record = await get_task(session, d.task_id)
        if record is None:
            return
        cleanup = CleanupInput(
            task_id=d.task_id,
            task_type=record.task.task_type,
            payload=record.task.payload,
            steps=[
                CleanupStep(
                    name=s.name,
                    position=s.position,
                    state=s.state,
                    compensation=s.compensation,
                    idempotency_key=s.idempotency_key,
                )
                for s in record.steps
            ],
            compensation_policy=self._settings.compensation,
            reason=d.reason,
            chain_id=record.task.chain_id,
        )
        from workflows.summaries import cleanup_details, cleanup_summary

        try:
            await self._client.start_workflow(
                "CleanupWorkflow",
                cleanup,
                id=cleanup_workflow_id(d.task_id),
                task_queue=record.task.task_queue,
                # Started once, ever: a repeated outbox flush finds it and leaves it alone.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=cleanup_summary(record.task.task_type, d.task_id, record.task.payload),
                static_details=cleanup_details(d.task_id, d.reason or ""),
            )
        except WorkflowAlreadyStartedError:
            pass
        log.info("clean-up started", extra={"fields": {"task_id": d.task_id, "queue": record.task.task_queue}})

    # -------------------------------------------------- detection d

    @activity.defn(name="supervisor.check_orphans")
    async def check_orphans(self, request: OrphanCheckInput) -> OrphanCheckResult:
        """Tasks the mirror says are open whose workflow was closed from outside: mark
        them Error, alert, and record a clean-up decision (started through the outbox)."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        before = now - timedelta(seconds=s.orphan_after_s)
        buckets = self._range(request.shard)
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
                _beat()
                result.checked += 1
                if task.version >= _CLEANUP_VERSION:
                    continue  # already being cleaned up
                closed = await self._closed_how(task, now)
                if closed is not None and await self._claim_cleanup(task, closed, now):
                    result.orphans.append(task.task_id)
                elif closed is None:
                    found = await reconcile_task(self._sessions, self._client, task.task_id)
                    result.repaired += len(found.repairs) if found else 0
        if result.orphans:
            await self._flush_outbox(buckets)
        return result

    async def _closed_how(self, task: tables.Task, now: datetime) -> str | None:
        """How the task's workflow was closed from outside, or None if it was not (running,
        completed - then reconciled - or unknown to Temporal, which only raises an alert)."""
        view = await look(self._client, task.task_id, task.chain_id, task.run_id)
        if view.status == "gone":
            await self._history_gone(task, now)
            return None
        if view.status == "running" and view.description is not None:
            await self._check_stuck(task, view.description, now)
        return view.how if view.status == "closed" else None

    async def _history_gone(self, task: tables.Task, now: datetime) -> None:
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
        async with self._sessions() as session, session.begin():
            new = await active_alert(session, key) is None
            await raise_alert(session, _alert_row(spec, task.task_id, task.current_step, 0, None, now, key=key))
        if new:
            _log_alert(spec, task.task_id, task.current_step, 0, None)

    async def _check_stuck(self, task: tables.Task, described: Any, now: datetime) -> None:
        """A running workflow whose workflow task keeps failing cannot act on any signal - the
        ladder is no use. Usually deployed code no longer matches its history (non-determinism).
        Say so, once, to an operator."""
        attempt = described.raw_description.pending_workflow_task.attempt
        if attempt < _STUCK_AFTER_ATTEMPTS:
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
        async with self._sessions() as session, session.begin():
            new = await active_alert(session, key) is None
            await raise_alert(session, _alert_row(spec, task.task_id, task.current_step, attempt, None, now, key=key))
        if new:
            _log_alert(spec, task.task_id, task.current_step, attempt, None)

    async def _claim_cleanup(self, task: tables.Task, closed: str, now: datetime) -> bool:
        async with self._sessions() as session:
            record = await get_task(session, task.task_id)
        done = [s.name for s in (record.steps if record else []) if s.state in _UNDO_STATES]
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
        alert = _alert_row(spec, task.task_id, "-", 0, None, now)
        async with self._sessions() as session:
            claimed = await claim_cleanup(session, decision, task.state, task.version, _CLEANUP_VERSION, alert)
        if claimed:
            _log_decision(task.task_id, "-", "cleanup", 0, reason)
            _log_alert(spec, task.task_id, "-", 0, None)
        return claimed

    # -------------------------------------------------- detection c

    @activity.defn(name="supervisor.check_queues")
    async def check_queues(self, request: QueueCheckInput) -> QueueCheckResult:
        """Queues with work waiting and nobody polling (or a growing backlog): one alert per
        queue incident, resolved when pollers return and the backlog stops growing."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        async with self._sessions() as session:
            waiting = await waiting_tasks_by_queue(session, now - timedelta(seconds=s.queue_idle_after_s))
        queues = dict.fromkeys([self._settings.temporal.task_queue, *waiting])
        result = QueueCheckResult(queues=len(queues))
        for queue in queues:
            _beat()
            by_kind, backlog = await self._describe_queue(queue)
            pollers = sum(by_kind.values())
            record_backlog(queue, backlog, pollers)
            result.backlog[queue] = backlog
            n = max(waiting.get(queue, 0), backlog)
            previous = request.backlog.get(queue)
            growing = previous is not None and backlog > previous and backlog >= s.batch_size
            key = f"queue_unpolled:{queue}"
            missing = [kind for kind, count in by_kind.items() if count == 0]
            if missing and n > 0:
                result.unpolled.append(queue)
                who = "no worker (workflows nor Agents)" if len(missing) == 2 else f"no {missing[0]} worker"
                spec = AlertSpec(
                    severity="critical",
                    kind="queue_unpolled",
                    message=(
                        f"{who} is polling queue {queue}; {n} steps waiting (backlog {backlog}); "
                        "their complete-by is not counted while they wait"
                    ),
                    suggested_action=f"start a task worker on {queue} (`sas worker` with SAS_TEMPORAL__TASK_QUEUE={queue})",
                )
                result.opened += await self._raise_queue_alert(key, spec, n, now)
            elif growing:
                spec = AlertSpec(
                    severity="warning",
                    kind="queue_backlog",
                    message=f"queue {queue}: backlog growing ({previous} -> {backlog}) with {pollers} pollers",
                    suggested_action=f"add task workers on {queue} or find out why they are slow",
                )
                result.opened += await self._raise_queue_alert(f"queue_backlog:{queue}", spec, n, now)
            if not missing:
                result.resolved += await self._resolve_key(key, now, f"{pollers} pollers are back on {queue}")
            if not growing:
                result.resolved += await self._resolve_key(f"queue_backlog:{queue}", now, "backlog no longer growing")
        result.stuck = await self._reported_problems(queues, now)
        # Incidents on queues that no longer have work waiting end too.
        async with self._sessions() as session:
            stale = [
                a
                for a in await active_alerts_of_kind(session, "queue_unpolled")
                if a.incident_key.split(":", 1)[1] not in queues
            ]
        for alert in stale:
            result.resolved += await self._resolve_key(alert.incident_key, now, "no steps waiting any more")
        return result

    async def _reported_problems(self, queues: dict[str, None], now: datetime) -> int:
        """Workflows on sas's queues that Temporal marks as stuck in workflow task failures
        (``TemporalReportedProblems``): one alert each, even for a workflow that never reached
        the mirror (a payload its worker cannot decrypt, a non-determinism error at start).
        Resolved when the mark goes. A server without the attribute is skipped."""
        listed = " OR ".join(f"TaskQueue = '{q}'" for q in queues)
        query = f"TemporalReportedProblems IS NOT NULL AND ExecutionStatus = 'Running' AND ({listed})"
        try:
            stuck = [w async for w in self._client.list_workflows(query, limit=100)]
        except RPCError as err:
            log.debug("TemporalReportedProblems not searchable here: %s", err.message)
            return 0
        marked = set()
        for wf in stuck:
            _beat()
            problems = wf.search_attributes.get("TemporalReportedProblems") or []
            key = f"workflow_stuck:{wf.id}"
            marked.add(key)
            spec = AlertSpec(
                severity="critical",
                kind="workflow_stuck",
                message=(
                    f"workflow {wf.id} ({wf.workflow_type}): its workflow task keeps failing "
                    f"({', '.join(map(str, problems)) or 'reported by Temporal'}), so it cannot make progress"
                ),
                suggested_action=(
                    "see the WorkflowTaskFailed event in the Temporal UI: a payload that cannot be decrypted "
                    "(check SAS_ENCRYPTION__KEYS on every worker), or new code that does not match its history "
                    "(docs/replay.md); fix the cause, or terminate it"
                ),
            )
            async with self._sessions() as session, session.begin():
                new = await active_alert(session, key) is None
                await raise_alert(session, _alert_row(spec, wf.id, None, 0, None, now, key=key))
            if new:
                _log_alert(spec, wf.id, None, 0, None)
        async with self._sessions() as session:
            gone = [
                a.incident_key
                for a in await active_alerts_of_kind(session, "workflow_stuck")
                if a.incident_key not in marked
            ]
        for key in gone:
            async with self._sessions() as session:
                task = await session.get(tables.Task, key.split(":", 1)[1])
            if task is None:  # the mirror-based check (check_orphans) owns the rest
                await self._resolve_key(key, now, "Temporal no longer reports a problem")
        return len(stuck)

    async def _describe_queue(self, queue: str) -> tuple[dict[str, int], int]:
        """Live pollers of the workflow and of the activity task queue, counted apart (a worker
        whose Agents are starved still polls workflows), and their approximate backlog."""
        pollers = {"workflow": 0, "activity": 0}
        backlog = 0
        fresh_after = datetime.now(UTC) - timedelta(seconds=self._settings.supervisor.poller_stale_s)
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            response = await self._client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self._client.namespace,
                    task_queue=TaskQueue(name=queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                    task_queue_type=kind,
                    report_stats=True,
                )
            )
            for poller in response.pollers:
                seen = poller.last_access_time.ToDatetime(tzinfo=UTC) if poller.HasField("last_access_time") else None
                pollers[_KIND_NAMES[kind]] += seen is None or seen >= fresh_after
            if response.HasField("stats"):
                backlog += response.stats.approximate_backlog_count
            elif response.HasField("task_queue_status"):
                backlog += response.task_queue_status.backlog_count_hint
        return pollers, backlog

    async def _raise_queue_alert(self, key: str, spec: AlertSpec, n: int, now: datetime) -> int:
        async with self._sessions() as session, session.begin():
            new = await active_alert(session, key) is None
            await raise_alert(session, _alert_row(spec, None, None, n, None, now, key=key))
        if new:
            _log_alert(spec, None, None, n, None)
        return int(new)

    async def _resolve_key(self, key: str, now: datetime, why: str) -> int:
        async with self._sessions() as session, session.begin():
            alert = await active_alert(session, key)
            if alert is None:
                return 0
            await resolve_alert(session, alert, now, why)
        log.info("alert resolved", extra={"fields": {"incident_key": key, "why": why}})
        return 1

    # ---------------------------------------------------------- webhook

    @activity.defn(name="supervisor.deliver_alerts")
    async def deliver_alerts(self) -> DeliveryResult:
        """POST new and escalated alerts to the webhook, signed (Standard Webhooks) through the
        checked, pinned sender of activities/outbound.py; a failed delivery is tried again later
        with a growing delay, never holding up a sweep. One the policy refuses is given up."""
        hook = self._settings.supervisor.webhook
        result = DeliveryResult()
        if not hook.url:
            return result
        async with self._sessions() as session:
            alerts = await undelivered_alerts(session, datetime.now(UTC), 50)
        if not alerts:
            return result  # most sweeps: no client (and TLS context) built for nothing
        async with WebhookSender(self._settings.outbound, hook.secret) as sender:
            for alert in alerts:
                _beat()
                claimed_at = datetime.now(UTC)
                lease = claimed_at + timedelta(seconds=hook.timeout_s + 5)
                async with self._sessions() as session:
                    if not await claim_delivery(session, alert.id, alert.delivery_attempts, claimed_at, lease):
                        continue  # another Supervisor (shard) is posting it
                body = json.dumps(alert_payload(alert), sort_keys=True, separators=(",", ":")).encode()
                # Same id across retries of this content; an escalation is a new message.
                message_id = f"alert-{alert.id}-{int(alert.updated_at.timestamp() * 1000)}"
                delivery = await sender.send(hook.url, message_id, body, hook.timeout_s)
                ok = delivery.ok
                now = datetime.now(UTC)
                attempts = alert.delivery_attempts + 1
                next_try = None
                if not ok and delivery.retryable and attempts < hook.max_attempts:
                    next_try = now + timedelta(seconds=hook.retry_delay_s * 2 ** (attempts - 1))
                elif not ok:
                    log.error(
                        "webhook gave up",
                        extra={"fields": {"alert_id": alert.id, "attempts": attempts, "error": delivery.problem}},
                    )
                async with self._sessions() as session:
                    await record_delivery(session, alert.id, now, ok, next_try)
                result.delivered += ok
                result.failed += not ok
        return result


_UNDO_STATES = ("Processed", "Processing", "Failed", "Compensating", "CompensationFailed", "Error")


async def _unsent(session: AsyncSession, limit: int, buckets: tuple[int, int] | None) -> list[tables.Decision]:
    query = select(tables.Decision).where(tables.Decision.signal_sent_at.is_(None))
    if buckets is not None:
        query = query.join(tables.Task, tables.Task.task_id == tables.Decision.task_id).where(
            tables.Task.shard >= buckets[0], tables.Task.shard < buckets[1]
        )
    return list((await session.scalars(query.order_by(tables.Decision.id).limit(limit))).all())


def _parse_cursor(raw: str | None) -> tuple[datetime, str] | None:
    if not raw:
        return None
    when, _, task_id = raw.partition("|")
    return datetime.fromisoformat(when), task_id


def _alert_row(
    spec: AlertSpec,
    task_id: str | None,
    step: str | None,
    failure_count: int,
    last_error: str | None,
    now: datetime,
    key: str | None = None,
) -> tables.Alert:
    return tables.Alert(
        incident_key=key or f"{spec.kind}:{task_id}:{step}",
        severity=spec.severity,
        kind=spec.kind,
        task_id=task_id,
        step=step,
        failure_count=failure_count,
        message=spec.message,
        last_error=last_error,
        suggested_action=spec.suggested_action,
        status="open",
        created_at=now,
        updated_at=now,
        delivery_attempts=0,
    )


def alert_payload(alert: tables.Alert) -> dict[str, object]:
    """The webhook's JSON body."""
    return {
        "id": alert.id,
        "severity": alert.severity,
        "kind": alert.kind,
        "task_id": alert.task_id,
        "step": alert.step,
        "failure_count": alert.failure_count,
        "message": alert.message,
        "last_error": alert.last_error,
        "suggested_action": alert.suggested_action,
        "status": alert.status,
        "created_at": alert.created_at.isoformat(),
        "updated_at": alert.updated_at.isoformat(),
    }


def _log_decision(task_id: str, step: str, kind: str, failure_count: int, reason: str) -> None:
    log.info(
        "decision",
        extra={
            "fields": {
                "task_id": task_id,
                "step": step,
                "decision": kind,
                "failure_count": failure_count,
                "reason": reason,
            }
        },
    )


def _log_alert(
    spec: AlertSpec, task_id: str | None, step: str | None, failure_count: int, last_error: str | None
) -> None:
    log.warning(
        "alert",
        extra={
            "fields": {
                "severity": spec.severity,
                "kind": spec.kind,
                "task_id": task_id,
                "step": step,
                "failure_count": failure_count,
                "message": spec.message,
                "last_error": last_error,
                "suggested_action": spec.suggested_action,
            }
        },
    )
