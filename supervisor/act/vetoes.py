"""What holds a decision back before it is claimed: its step's service held by a breaker, or
Temporal's view of its task (the mirror follows Temporal, never leads it).

The facts are fetched here, judged by the pure vetoes of ``sas.supervisor.decide``
(``breaker_holds``, ``temporal_says_wait``), and what a veto says is done here: the step's next
look moved, and the reason logged. A step Temporal shows paused by its own tools is parked on
the way (``outside_pauses``), and a row Temporal shows behind is reconciled.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client

from sas.breaker.held import holding, service_of_step
from sas.breaker.model import BreakerView
from sas.reconciliation.repairs import reconcile_task
from sas.reconciliation.temporal_view import look, waiting_reason
from sas.settings import Settings
from sas.state_store.decisions import defer_step
from sas.state_store.queries import get_step, get_task_row
from sas.supervisor.act.outside_pauses import paused_outside_sas, record_outside_pause
from sas.supervisor.activity_support import CLEANUP_VERSION, policy_from_settings
from sas.supervisor.decide import PutOff, breaker_holds, temporal_says_wait
from sas.supervisor.models import Decision, SupervisorPolicy

log = logging.getLogger("sas.supervisor")


class Vetoes:
    """Asks, for one decision at a time, whether something holds it back, and does what that says."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, settings: Settings) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings

    async def held_services(self) -> dict[str, BreakerView]:
        """The services whose breaker holds their work now, read once per sweep."""
        return await holding(self._sessions, datetime.now(UTC))

    async def held_by_breaker(self, d: Decision, held: dict[str, BreakerView]) -> bool:
        """Whether the step's service's breaker holds the decision back (``decide.breaker_holds``)."""
        if not held:
            return False
        async with self._sessions() as session:
            step = await get_step(session, d.task_id, d.step)
        service = service_of_step(step.agent) if step is not None else None
        put_off = breaker_holds(held.get(service) if service else None, datetime.now(UTC), self._policy())
        return await self._put_off(d, put_off)

    async def temporal_says_wait(self, d: Decision) -> bool:
        """Whether Temporal's view of the task holds the decision back (``decide.temporal_says_wait``):
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
