"""The decision outbox: decisions claimed in the state store but not yet carried out.

A decision row is written (claimed) first and sent after, so a Supervisor that dies between
the two leaves it here and the next sweep sends it. Sending twice is harmless: the Scheduler
ignores a signal whose FailureCount it has already seen, and a clean-up workflow is started
once per task, ever.

A clean-up's start may find its id, ``cleanup-<task>``, already held: by the clean-up an earlier
flush started, or by a workflow that is not sas's clean-up of that task at all (an order
submitted under that id before such ids were refused, a workflow a client with write access
started). Only the first is taken for the clean-up. Anything else gets a critical alert and the
decision stays in the outbox: the clean-up has not started, and each sweep tries again until
the id is free.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from sas.activities.cleanup_plans import cleanup_input
from sas.runtime.task_faults import TaskFault
from sas.settings import Settings
from sas.state_store import tables
from sas.state_store.decisions import mark_sent, unsent_decisions
from sas.state_store.queries import get_task
from sas.supervisor.activity_support import beat, bounded
from sas.supervisor.alert import raise_once, resolve_key
from sas.supervisor.models import AlertSpec
from sas.supervisor.per_task import isolated
from sas.task_models import OperatorRequest
from sas.task_models.ids import cleanup_workflow_id
from sas.workflows.definitions import TaskDefinition
from sas.workflows.registry import TaskTypeError, task_types
from sas.workflows.summaries import cleanup_details, cleanup_summary

log = logging.getLogger("sas.supervisor")

# Decisions sent per flush; the rest wait for the next sweep.
_FLUSH_BATCH = 500
# The clean-up workflow's type, as sas starts it.
CLEANUP_WORKFLOW = "CleanupWorkflow"
# The alert of a clean-up whose id something else holds.
CLEANUP_ID_TAKEN = "cleanup_id_taken"
# How sas's clean-up of a task may be found: still undoing, or done. One that ended otherwise
# (refused: started before any clean-up was decided; or closed from outside) undid nothing.
_CLEANUP_UNDER_WAY = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.COMPLETED)


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
                if not await self._start_cleanup(d):
                    return  # not started: the decision stays in the outbox
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

    async def _start_cleanup(self, d: tables.Decision) -> bool:
        """Start the task's clean-up; whether it is under way (False: something else holds its id)."""
        async with self._sessions() as session:
            record = await get_task(session, d.task_id)
        if record is None:
            return True  # nothing to undo: nothing to wait for
        workflow_id = cleanup_workflow_id(d.task_id)
        # The same plan the clean-up derives for itself (cleanup.plan): a worker from before it
        # did so still undoes from this input.
        cleanup = cleanup_input(record, self._settings, d.reason)
        try:
            await self._client.start_workflow(
                CLEANUP_WORKFLOW,  # its run takes the raw payload (workflows/inputs.py)
                cleanup,
                id=workflow_id,
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
            pass  # a closed run holds the id: what it is is asked below, as of a running one
        held_by = await self._not_its_cleanup(workflow_id, d.task_id)
        now = datetime.now(UTC)
        key = f"{CLEANUP_ID_TAKEN}:{d.task_id}"
        if held_by is not None:
            await self._alert_taken(d.task_id, workflow_id, held_by, key, now)
            return False
        await resolve_key(self._sessions, key, now, f"{workflow_id} is the task's clean-up")
        log.info("clean-up started", extra={"fields": {"task_id": d.task_id, "queue": record.task.task_queue}})
        return True

    async def _not_its_cleanup(self, workflow_id: str, task_id: str) -> str | None:
        """What holds ``workflow_id``, in words, when it is not sas's clean-up of ``task_id``
        under way; None when it is. Its type and status from Temporal, the task it names from
        its input (the clean-up takes the task's id from it), who started it from its first event."""
        handle = self._client.get_workflow_handle(workflow_id)
        described = await handle.describe()
        status = described.status.name.lower() if described.status is not None else "of unknown status"
        started = None
        async for event in handle.fetch_history_events(page_size=1):
            started = event.workflow_execution_started_event_attributes
            break
        by = f", started by {started.identity[:100]!r}" if started is not None and started.identity else ""
        if described.workflow_type != CLEANUP_WORKFLOW:
            return f"a workflow of type {described.workflow_type[:100]} ({status}{by})"
        named = await self._task_named(started.input.payloads if started is not None else [])
        if named != task_id:
            of = f"task {named[:128]!r}" if named else "no task its input names"
            return f"a clean-up of {of} ({status}{by})"
        if described.status not in _CLEANUP_UNDER_WAY:
            return f"a clean-up of it that ended {status} without undoing it (refused, or closed from outside{by})"
        return None

    async def _task_named(self, payloads: Sequence[Payload]) -> str | None:
        """The task id a clean-up's input names; None when it names none (or cannot be read)."""
        try:
            values = await self._client.data_converter.decode(payloads)
        except Exception:  # noqa: BLE001 - an input that cannot be read names no task
            return None
        first = values[0] if values else None
        named = first.get("task_id") if isinstance(first, dict) else None
        return named if isinstance(named, str) else None

    async def _alert_taken(self, task_id: str, workflow_id: str, held_by: str, key: str, now: datetime) -> None:
        spec = AlertSpec(
            severity="critical",
            kind=CLEANUP_ID_TAKEN,
            message=(
                f"task {task_id}: its clean-up cannot start: {workflow_id} is held by {held_by}, not sas's clean-up"
                f" of it; nothing of {task_id} has been undone"
            ),
            suggested_action=(
                f"find out who started {workflow_id} (the Temporal UI); once it has ended (`temporal workflow"
                f" terminate --workflow-id {workflow_id}` if it runs), delete it (`temporal workflow delete"
                f" --workflow-id {workflow_id}`): the Supervisor starts the clean-up at its next sweep"
            ),
        )
        if await raise_once(self._sessions, spec, key, now, task_id=task_id, step="-"):
            log.warning(
                "clean-up not started: its id is held by another workflow",
                extra={"fields": {"task_id": task_id, "workflow_id": workflow_id, "held_by": held_by}},
            )


def _definition(task_type: str) -> TaskDefinition | None:
    """The task type's definition, for its declared summary; None if this process does not run it."""
    try:
        found = task_types().get(task_type)
    except TaskTypeError:
        return None
    return None if found is None else found.definition
