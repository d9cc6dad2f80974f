"""A task id is one task, forever: the refusal a reused id gets, and the one exception -
an operator's explicit `sas resubmit` of a finished task, which starts its next incarnation.

The next incarnation gets fresh rows and idempotency keys of its own (``<task>#<n>:<step>``),
so nothing it does is mistaken for the first run's effects; the finished incarnation's rows
are kept in ``task_archive`` and the resubmission is written to the audit log.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store import mirror
from sas.state_store.queries import as_dict, get_task
from sas.state_store.redrive import kept_by, redrive
from sas.state_store.tables import AuditEntry, TaskArchive
from sas.task_models import AcceptOutcome, TaskAccepted, TaskState, incarnation_key
from sas.task_models.plans import KeptStep

# Finished tasks that an operator may run again; a Processed task is done and stays done.
RESUBMITTABLE = (str(TaskState.COMPENSATED), str(TaskState.ERROR))


def refusal(task_id: str, outcome: AcceptOutcome) -> str:
    """What a run started under an id that belongs to another task is told (and fails with)."""
    if outcome.why is not None:
        return f"task {task_id} cannot be redriven: {outcome.why}; this run changed nothing"
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
        record = await get_task(session, accepted.task_id, for_update=True)
        if record is None:
            return AcceptOutcome(status="other_task", state="gone")
        task = record.task
        if task.chain_id == accepted.chain_id:
            return AcceptOutcome(status="resubmitted", state=task.state, incarnation=task.incarnation)
        if task.chain_id != request.of or task.state not in RESUBMITTABLE:
            return AcceptOutcome(status="other_task", state=task.state, incarnation=task.incarnation)
        previous_state, incarnation = task.state, task.incarnation + 1
        snapshot = {"task": as_dict(task), "steps": [as_dict(s) for s in record.steps]}
        # Counting FailureCount afresh is a reset: a new epoch keeps the new decisions apart from the old.
        resets = max((s.resets for s in record.steps), default=0) + 1
        keys = {p.name: incarnation_key(p.idempotency_key, incarnation) for p in accepted.steps}
        kept: list[KeptStep] = []
        if request.from_step is not None:
            redriven = redrive(accepted.steps, record.steps, request.from_step, incarnation, force=request.force)
            if isinstance(redriven, str):
                return AcceptOutcome(
                    status="other_task", state=previous_state, incarnation=incarnation - 1, why=redriven
                )
            kept, keys = redriven
        if not await mirror.start_incarnation(session, accepted, incarnation, resets, keys, now, kept):
            return AcceptOutcome(status="other_task", state=previous_state, incarnation=incarnation - 1)
        session.add(
            TaskArchive(
                task_id=accepted.task_id,
                incarnation=incarnation - 1,
                chain_id=request.of,
                state=previous_state,
                snapshot=snapshot,
                archived_at=now,
            )
        )
        session.add(
            AuditEntry(
                task_id=accepted.task_id,
                run_id=accepted.run_id or "",
                seq=0,
                step=None,
                action="resubmit" if request.from_step is None else "redrive",
                actor=request.by,
                reason=request.reason,
                changed=_changed(previous_state, incarnation, request.from_step, kept),
                at=now,
            )
        )
    if request.from_step is None:
        return AcceptOutcome(status="resubmitted", state=str(TaskState.PENDING), incarnation=incarnation)
    return AcceptOutcome(
        status="resubmitted", state=str(TaskState.PENDING), incarnation=incarnation, keys=keys, kept=kept
    )


def _changed(previous_state: str, incarnation: int, from_step: str | None, kept: list[KeptStep]) -> str:
    """The audit entry's account of what the resubmission (or redrive) did."""
    archived = f"{previous_state} incarnation {incarnation - 1} archived; incarnation {incarnation} started"
    if from_step is None:
        return f"{archived} with new idempotency keys"
    held = ", ".join(k.name for k in kept) or "no step"
    return f"{archived}, redriven from {from_step}: {held} kept as done, with their results and idempotency keys"


async def redrive_as_accepted(session: AsyncSession, accepted: TaskAccepted, outcome: AcceptOutcome) -> AcceptOutcome:
    """A redriven incarnation accepted again (its accept retried, the run reset): its kept steps
    and keys as its rows hold them, never the new keys of a plain incarnation, which would run
    the kept steps' effects again."""
    request = accepted.resubmission
    assert request is not None and request.from_step is not None, "only a redrive keeps steps"
    async with session.begin():
        record = await get_task(session, accepted.task_id)
    if record is None:
        return outcome
    redriven = kept_by(accepted, record.steps, request.from_step)
    if redriven is None:
        return outcome
    kept, keys = redriven
    return outcome.model_copy(update={"kept": kept, "keys": keys})
