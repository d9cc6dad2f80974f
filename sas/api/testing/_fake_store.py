"""The state store's stand-in for a team's fast tests (``FakeAgents`` registers it): the
Scheduler's accept, writes and audit answered in memory, each task's steps kept as the rows
would keep them, so that ``cleanup.plan`` can answer a parent undoing a child task that has
completed, from what that child recorded, as the real one does (activities/cleanup_plans.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from temporalio import activity
from temporalio.exceptions import ApplicationError

from sas.activities.cleanup_plans import CLEANUP_REFUSED
from sas.state_store.pivots import past_point_of_no_return
from sas.state_store.rows import StepRow
from sas.task_models import (
    AuditRecord,
    CallbackEvent,
    StepCall,
    StepPlan,
    StepPolicyValues,
    StepState,
    TaskAccepted,
    TaskPlan,
    TransitionBatch,
)
from sas.task_models.cleanup import CleanupInput, CleanupRequest, CleanupStep
from sas.task_models.versions import Phase, version_of

# Quick retries that a test does not wait for.
FAST = StepPolicyValues(complete_by_s=10, max_attempts=2, initial_interval_s=0.1, backoff=1.0, max_interval_s=0.1)


@dataclass
class _StepRow:
    """One step's row: what the rule of the point of no return reads, and its latest write."""

    name: str
    pivot: str | None
    state: StepState = StepState.PENDING
    permanent: bool = False
    version: int = 0


@dataclass
class _TaskRows:
    accepted: TaskAccepted
    plans: list[StepPlan]
    steps: dict[str, _StepRow] = field(default_factory=dict)


@dataclass
class FakeStore:
    """Each accepted task's rows, by task id, written as the Scheduler and its clean-ups write."""

    tasks: dict[str, _TaskRows] = field(default_factory=dict)

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name="mirror.accept")
        async def accept(accepted: TaskAccepted) -> TaskPlan:
            steps = [p.model_copy(update={"policy": p.policy or FAST}) for p in accepted.steps]
            rows = _TaskRows(accepted, steps, {p.name: _StepRow(p.name, p.pivot) for p in steps})
            self.tasks.setdefault(accepted.task_id, rows)
            plan = TaskPlan(steps=steps, compensation_policy=FAST, waits_for_cancelled_attempts=True)
            return plan.compacted(accepted.steps)  # as a versioned worker records it

        @activity.defn(name="mirror.record")
        async def record(batch: TransitionBatch) -> int:
            for t in batch.transitions:
                self._write(t.task_id, t.step, t.state, t.version, t.permanent)
            return len(batch.transitions)

        @activity.defn(name="mirror.audit")
        async def audit(entry: AuditRecord) -> bool:
            return True

        @activity.defn(name="callback.post")
        async def post(event: CallbackEvent) -> None:
            return None

        @activity.defn(name="cleanup.plan")
        async def plan(request: CleanupRequest) -> CleanupInput:
            return self.cleanup_plan(request)

        return [accept, record, audit, post, plan]

    def agent_wrote(self, call: StepCall, *, done: bool) -> None:
        """The row write of an Agent's attempt (activities/agent.py): its start, or its success."""
        if call.item_key is not None:
            return  # a fan-out's items share their step's row, which only the Scheduler writes
        if done:
            state, phase = (StepState.COMPENSATED if call.compensation else StepState.PROCESSED), Phase.AGENT_DONE
        else:
            state, phase = (StepState.COMPENSATING if call.compensation else StepState.PROCESSING), Phase.AGENT_STARTED
        self._write(call.task_id, call.step, state, version_of(call.stamp.seq, activity.info().attempt, phase))

    def _write(self, task_id: str, step: str, state: StepState, version: int, permanent: bool | None = None) -> None:
        rows = self.tasks.get(task_id)
        row = rows.steps.get(step) if rows is not None else None
        if row is not None and version >= row.version:  # later writes win, as on the rows
            row.state, row.version = state, version
            row.permanent = permanent if permanent is not None else row.permanent

    def cleanup_plan(self, request: CleanupRequest) -> CleanupInput:
        """A completed child's undo, as its rows show it, when the parent it names is its own;
        refused, as the real plan refuses, otherwise. A fast test has no Supervisor to decide
        a clean-up of a task closed from outside, so only a parent's is planned."""
        rows = self.tasks.get(request.task_id)
        link = rows.accepted.parent if rows is not None else None
        if rows is None or link is None or (link.task_id, link.step) != (request.parent_task_id, request.parent_step):
            raise _refused(request, f"it is not the child of step {request.parent_step} of {request.parent_task_id}")
        past = past_point_of_no_return(cast("Sequence[StepRow]", list(rows.steps.values())))
        if past is not None:
            raise _refused(request, f"it is past its point of no return ({past}): it is never undone")
        accepted = rows.accepted
        return CleanupInput(
            task_id=accepted.task_id,
            task_type=accepted.task_type,
            payload=accepted.payload,
            steps=[
                CleanupStep(
                    name=p.name,
                    position=p.position,
                    state=rows.steps[p.name].state,
                    compensation=p.compensation,
                    idempotency_key=p.idempotency_key,
                    version=rows.steps[p.name].version,
                    agent=p.agent,
                )
                for p in rows.plans
            ],
            compensation_policy=FAST,
            reason=request.reason,
            chain_id=accepted.chain_id,
            parent_task_id=request.parent_task_id,
            parent_step=request.parent_step,
        )


def _refused(request: CleanupRequest, why: str) -> ApplicationError:
    return ApplicationError(
        f"clean-up of {request.task_id} refused (fake): {why}", type=CLEANUP_REFUSED, non_retryable=True
    )
