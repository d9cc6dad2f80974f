"""The Scheduler's own writes to the state store, run as local activities.

``mirror.accept`` also hands the workflow the step policies in force on this
worker (settings), so they are recorded once in history and replay identically.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.refused_writes import RefusedWrites
from sas.activities.supervisor_wakes import SupervisorWakes
from sas.settings import Settings
from sas.state_store.agent_writes.writer import StepWriter
from sas.state_store.incarnations import redrive_as_accepted, refusal, resubmit_task
from sas.state_store.mirror import record_audit, record_transitions
from sas.state_store.rejections import refused_for_good
from sas.task_models import (
    AuditRecord,
    StepPlan,
    StepPolicyValues,
    TaskAccepted,
    TaskPlan,
    TransitionBatch,
    incarnation_key,
)
from sas.task_models.activity_defs import MirrorDefs, implements
from sas.task_models.outbound import OutboundRefused, check_url
from sas.task_models.queues import agent_queue, service_of


class MirrorActivities(MirrorDefs):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        writer: StepWriter,
        settings: Settings,
        search_attributes: bool = True,
    ) -> None:
        self._sessions = sessions
        self._writer = writer
        self._settings = settings
        self._search_attributes = search_attributes
        self._refused = RefusedWrites(sessions)
        self._wakes = SupervisorWakes()

    @implements(MirrorDefs.accept)
    async def accept(self, accepted: TaskAccepted) -> TaskPlan:
        self._check_callback_url(accepted)
        declared = accepted.steps
        # Each step's Agents run on the workflow's queue or on their service's own, as its
        # settings ask (task_models/queues.py): decided here, once, and recorded in history
        # with the plan.
        steps = [
            plan.model_copy(
                update={
                    "policy": self._policy(accepted.task_type, plan),
                    "task_queue": self._agent_queue(accepted.task_queue, plan.agent),
                }
            )
            for plan in accepted.steps
        ]
        accepted = accepted.model_copy(update={"steps": steps})
        # On the hot path, so through the Agents' writer: one statement batch, no ORM.
        redrive = accepted.resubmission is not None and accepted.resubmission.from_step is not None
        try:
            outcome = await self._writer.accept(accepted)
            if outcome.status == "other_task" and accepted.resubmission is not None:
                async with self._sessions() as session:
                    outcome = await resubmit_task(session, accepted)
            elif redrive and outcome.incarnation > 1:
                async with self._sessions() as session:
                    outcome = await redrive_as_accepted(session, accepted, outcome)
        except Exception as err:
            if refused_for_good(err):
                # Nothing has been done for this task yet: it fails here, visibly, and is not retried.
                raise await self._refused.refuse(accepted.task_id, None, "accept", err) from None
            raise
        refused = refusal(accepted.task_id, outcome) if outcome.status == "other_task" else None
        if refused is not None:
            activity.logger.warning("task id reused: %s", refused)
        if outcome.keys is not None:
            keys = outcome.keys  # a redrive's: its kept steps' and its sent calls' keys are the ones before
            steps = [p.model_copy(update={"idempotency_key": keys.get(p.name, p.idempotency_key)}) for p in steps]
        elif outcome.incarnation > 1:
            n = outcome.incarnation
            steps = [p.model_copy(update={"idempotency_key": incarnation_key(p.idempotency_key, n)}) for p in steps]
        plan = TaskPlan(
            steps=steps,
            compensation_policy=self._settings.compensation,
            supervisor_workflow_id=self._settings.supervisor.workflow_id_for_task(accepted.task_id),
            search_attributes=self._search_attributes,
            # One upsert on the happy path, at the end (each is a history event and a visibility
            # write); the UI finds a running task by ExecutionStatus meanwhile.
            publish_progress=False,
            refused=refused,
            incarnation=outcome.incarnation,
            waits_for_cancelled_attempts=True,
            kept=outcome.kept or None,
        )
        # Recorded in the task's history: compact, when every worker that may replay it reads that.
        return plan.compacted(declared) if self._settings.worker.writes_compact_plans else plan

    def _check_callback_url(self, accepted: TaskAccepted) -> None:
        """The outbound policy at accept time, for tasks started without ``sas submit`` (the
        workflow itself can only check a URL's shape). No DNS here: names are resolved and
        checked when each event is sent (activities/outbound.py)."""
        url = accepted.payload.get("callback_url")
        if not url:
            return
        try:
            check_url(url, self._settings.outbound)
        except OutboundRefused as err:
            raise ApplicationError(
                f"invalid {accepted.task_type} input: callback_url: {err}",
                type="InvalidInput",  # the Scheduler's INVALID_INPUT: refused, never retried
                non_retryable=True,
            ) from None

    def _agent_queue(self, task_queue: str, agent: str) -> str | None:
        service = service_of(agent)
        return agent_queue(task_queue, service, self._settings.services.has_own_queue(service))

    def _policy(self, task_type: str, plan: StepPlan) -> StepPolicyValues:
        """Where a step's policy comes from: SAS_STEPS__<TYPE>__<STEP>__*, else
        SAS_STEPS__<STEP>__*, else the step's declaration, else SAS_DEFAULT_STEP__*."""
        return self._settings.step_override(task_type, plan.name) or plan.policy or self._settings.default_step

    @implements(MirrorDefs.record)
    async def record(self, batch: TransitionBatch) -> int:
        try:
            async with self._sessions() as session:
                written = await record_transitions(session, batch.transitions)
        except Exception as err:
            if refused_for_good(err) and batch.transitions:
                first = batch.transitions[0]
                raise await self._refused.refuse(
                    first.task_id, first.step, f"{first.step} {first.state}", err
                ) from None
            raise
        if batch.wake:
            self._wakes.wake(activity.client(), batch.wake)
        return written

    @implements(MirrorDefs.audit)
    async def audit(self, record: AuditRecord) -> bool:
        try:
            async with self._sessions() as session:
                return await record_audit(session, record)
        except Exception as err:
            if refused_for_good(err):
                raise await self._refused.refuse(record.task_id, record.step, f"audit {record.action}", err) from None
            raise
