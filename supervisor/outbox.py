"""The decision outbox: decisions claimed in the state store but not yet carried out.

A decision row is written (claimed) first and sent after, so a Supervisor that dies between
the two leaves it here and the next sweep sends it. Sending twice is harmless: the Scheduler
ignores a signal whose FailureCount it has already seen, and a clean-up workflow is started
once per task, ever.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from sas.activities.cleanup_plans import cleanup_input
from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import mark_sent, unsent_decisions
from sas.state_store.queries import get_task
from sas.supervisor.activity_support import beat, bounded
from sas.supervisor.per_task import isolated
from sas.supervisor.task_faults import TaskFault
from sas.task_models import OperatorRequest
from sas.task_models.ids import cleanup_workflow_id
from sas.workflows.definitions import TaskDefinition
from sas.workflows.registry import TaskTypeError, task_types
from sas.workflows.summaries import cleanup_details, cleanup_summary

log = logging.getLogger("sas.supervisor")

# Decisions sent per flush; the rest wait for the next sweep.
_FLUSH_BATCH = 500


async def unsent(session: AsyncSession, limit: int, buckets: tuple[int, int] | None) -> list[tables.Decision]:
    """The oldest decisions not yet sent, of the shard's buckets (all of them when None)."""
    return await unsent_decisions(session, limit, buckets)


class Outbox:
    """Sends what the outbox holds: a signal to the task's workflow, or a clean-up workflow's start."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, settings: Settings) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings

    async def flush(self, buckets: tuple[int, int] | None) -> int:
        """Send the unsent decisions of ``buckets``; the number of signals delivered."""
        sent = 0
        async with self._sessions() as session:
            pending = await unsent(session, _FLUSH_BATCH, buckets)

        async def deliver(d: tables.Decision) -> None:
            nonlocal sent
            if d.kind == "cleanup":
                await self._start_cleanup(d)
            elif await self._signal(d):
                sent += 1
            async with self._sessions() as session:
                await mark_sent(session, d.id, datetime.now(UTC))

        async def send(d: tables.Decision) -> None:
            # One decision that cannot be sent (invalid as it is, refused by Temporal, its task not
            # answering) is alerted for its task; the others are sent all the same.
            outcome = await isolated(self._sessions, d.task_id, "decision send", partial(deliver, d), step=d.step)
            if isinstance(outcome, TaskFault) and outcome.for_good:
                # The same on every try: given up (taken out of the outbox), not retried for ever.
                # The alert says so; an operator decides for the task (`sas retry`, `sas compensate`).
                log.warning(
                    "decision given up: it can never be sent",
                    extra={"fields": {"task_id": d.task_id, "decision": d.kind, "cause": outcome.cause}},
                )
                async with self._sessions() as session:
                    await mark_sent(session, d.id, datetime.now(UTC))

        # One decision per task in a sweep's outbox, each signal to its own workflow: sent side by
        # side. Decisions of one task (a retry after a crashed sweep's) stay in order, one by one.
        by_task: dict[str, list[tables.Decision]] = {}
        for d in pending:
            by_task.setdefault(d.task_id, []).append(d)

        async def in_order(decisions: list[tables.Decision]) -> None:
            for d in decisions:
                beat()
                await send(d)

        await bounded(self._settings.supervisor.concurrency, [partial(in_order, ds) for ds in by_task.values()])
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
        # The same plan the clean-up derives for itself (cleanup.plan): a worker from before it
        # did so still undoes from this input.
        cleanup = cleanup_input(record, self._settings, d.reason)
        try:
            await self._client.start_workflow(
                "CleanupWorkflow",  # its run takes the raw payload (workflows/inputs.py)
                cleanup,
                id=cleanup_workflow_id(d.task_id),
                task_queue=record.task.task_queue,
                # Started once, ever: a repeated outbox flush finds it and leaves it alone.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=cleanup_summary(
                    record.task.task_type, d.task_id, record.task.payload, _definition(record.task.task_type)
                ),
                static_details=cleanup_details(d.task_id, d.reason or ""),
            )
        except WorkflowAlreadyStartedError:
            pass
        log.info("clean-up started", extra={"fields": {"task_id": d.task_id, "queue": record.task.task_queue}})


def _definition(task_type: str) -> TaskDefinition | None:
    """The task type's definition, for its declared summary; None if this process does not run it."""
    try:
        found = task_types().get(task_type)
    except TaskTypeError:
        return None
    return None if found is None else found.definition
