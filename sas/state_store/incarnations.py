"""A task id is one task, forever: the refusal a reused id gets, and the one exception -
an operator's explicit `sas resubmit` of a finished task, which starts its next incarnation.

The next incarnation gets fresh rows and idempotency keys of its own (``<task>#<n>:<step>``),
so nothing it does is mistaken for the first run's effects; the finished incarnation's rows
are kept in ``task_archive`` and the resubmission is written to the audit log.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store.tables import AuditEntry, Step, Task, TaskArchive, shard_of
from sas.task_models import AcceptOutcome, StepState, TaskAccepted, TaskState, incarnation_key

# Finished tasks that an operator may run again; a Processed task is done and stays done.
RESUBMITTABLE = (str(TaskState.COMPENSATED), str(TaskState.ERROR))


def refusal(task_id: str, outcome: AcceptOutcome) -> str:
    """What a run started under an id that belongs to another task is told (and fails with)."""
    how = (
        f"`sas resubmit {task_id}` runs it again as a new incarnation, or submit it under a new id"
        if outcome.state in RESUBMITTABLE
        else "submit it under a new id"
    )
    return (
        f"task {task_id} already exists and is {outcome.state}: a task id is one task, so this run "
        f"changed nothing; {how}"
    )


async def resubmit_task(session: AsyncSession, accepted: TaskAccepted) -> AcceptOutcome:
    """Start the next incarnation of a finished task, if the resubmission still applies.

    It applies when the task is Compensated or Error and is still the chain of runs the
    operator resubmitted (``resubmission.of``); otherwise the id is refused as reused."""
    request = accepted.resubmission
    assert request is not None, "resubmit_task needs a resubmission"
    now = datetime.now(UTC)
    async with session.begin():
        task = await session.get(Task, accepted.task_id, with_for_update=True)
        if task is None:
            return AcceptOutcome(status="other_task", state="gone")
        if task.chain_id == accepted.chain_id:
            return AcceptOutcome(status="resubmitted", state=task.state, incarnation=task.incarnation)
        if task.chain_id != request.of or task.state not in RESUBMITTABLE:
            return AcceptOutcome(status="other_task", state=task.state, incarnation=task.incarnation)
        steps = list((await session.scalars(select(Step).where(Step.task_id == task.task_id))).all())
        session.add(
            TaskArchive(
                task_id=task.task_id,
                incarnation=task.incarnation,
                chain_id=task.chain_id,
                state=task.state,
                snapshot={"task": _row(task), "steps": [_row(s) for s in steps]},
                archived_at=now,
            )
        )
        incarnation = task.incarnation + 1
        # Counting FailureCount afresh is a reset: a new epoch keeps the new decisions apart from the old.
        resets = max((s.resets for s in steps), default=0) + 1
        await session.execute(delete(Step).where(Step.task_id == task.task_id))
        previous_state = task.state
        task.state, task.current_step, task.version = str(TaskState.PENDING), None, 0
        task.payload, task.chain_id, task.run_id = accepted.payload, accepted.chain_id, accepted.run_id
        task.incarnation, task.updated_at = incarnation, now
        for plan in accepted.steps:
            session.add(
                Step(
                    task_id=task.task_id,
                    name=plan.name,
                    position=plan.position,
                    agent=plan.agent,
                    compensation=plan.compensation,
                    state=str(StepState.PENDING),
                    failure_count=0,
                    resets=resets,
                    attempt=0,
                    permanent=False,
                    idempotency_key=incarnation_key(plan.idempotency_key, incarnation),
                    complete_by_s=plan.resolved_policy.complete_by_s,
                    version=0,
                    updated_at=now,
                    shard=shard_of(task.task_id),
                    chain_id=accepted.chain_id,
                    run_id=accepted.run_id,
                )
            )
        session.add(
            AuditEntry(
                task_id=task.task_id,
                run_id=accepted.run_id or "",
                seq=0,
                step=None,
                action="resubmit",
                actor=request.by,
                reason=request.reason,
                changed=f"{previous_state} incarnation {incarnation - 1} archived; incarnation {incarnation} started "
                "with new idempotency keys",
                at=now,
            )
        )
    return AcceptOutcome(status="resubmitted", state=str(TaskState.PENDING), incarnation=incarnation)


def _row(obj: Task | Step) -> dict[str, object]:
    return {
        c.key: (v.isoformat() if isinstance(v := getattr(obj, c.key), datetime) else v)
        for c in obj.__table__.columns  # type: ignore[attr-defined]
    }
