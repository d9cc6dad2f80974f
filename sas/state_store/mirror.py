"""Every write to ``tasks`` and ``steps`` outside the hot path, run in an ORM session.

The statements and their rules are the one writer's (``sas.state_store.mirror_rules``); these
functions only give them their parameters and run them in the caller's session: the
Scheduler's transitions and audit entries, the Supervisor's claims (``decisions``), an
operator's park mark (``sas/client/parking.py``), reconciliation's repairs (``sas.reconciliation.repairs``)
and a resubmitted task's next incarnation (``incarnations``). The hot path - acceptance and
the Agents' writes - runs the same statements on its own connections (``agent_writes``).

Except ``record_transitions`` and ``record_audit``, each runs inside the caller's transaction
and returns whether its row was written (False: the row was not as the caller read it).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, Executable, select
from sqlalchemy.ext.asyncio import AsyncSession

from sas.state_store import mirror_rules as rules
from sas.state_store.alerts import raise_refused_result
from sas.state_store.tables import AuditEntry, Decision
from sas.task_models import AuditRecord, StepTransition, TaskAccepted
from sas.task_models.plans import KeptStep
from sas.task_models.seals import REFUSED_RESULT
from sas.task_models.versions import version_of


async def _run(session: AsyncSession, statement: Executable, params: dict[str, Any] | list[dict[str, Any]]) -> int:
    """Run one of the writer's statements; how many rows it changed."""
    values = rules.bound(params) if isinstance(params, dict) else [rules.bound(p) for p in params]
    result = await session.execute(statement, values)
    return cast("CursorResult[Any]", result).rowcount or 0


def _backend(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


async def record_transitions(session: AsyncSession, transitions: list[StepTransition]) -> int:
    """Apply transitions in one transaction; returns how many step rows changed.

    A transition older than (or equal to) what a row already holds is skipped, so
    retries and replays leave the same row and late writes never win.
    """
    changed = 0
    async with session.begin():
        for t in transitions:
            changed += await _apply(session, t)
    return changed


async def _apply(session: AsyncSession, t: StepTransition) -> int:
    """One transition (its step row, and its task row if it moves the task), in the caller's transaction."""
    params = rules.transition_params(t)
    changed = await _run(session, rules.STEP_WRITE, params)
    if t.task_state is not None:
        await _run(session, rules.TASK_WRITE, params)
    return changed


async def claim_step(
    session: AsyncSession,
    task_id: str,
    step: str,
    seen_failure_count: int,
    seen_version: int,
    failure_count: int,
    next_look_at: datetime,
) -> bool:
    """The Supervisor's claim of a decision: FailureCount (never lower) and its next look, if unchanged."""
    params = {
        "task_id": task_id,
        "step": step,
        "seen_failure_count": seen_failure_count,
        "seen_version": seen_version,
        "failure_count": failure_count,
        "complete_by": next_look_at,
    }
    return bool(await _run(session, rules.CLAIM_STEP, params))


async def put_off_step(
    session: AsyncSession, task_id: str, step: str, seen_version: int, seen_failure_count: int, until: datetime
) -> bool:
    """Move a step's next look to ``until`` without counting a failure, if the row is unchanged."""
    params = {
        "task_id": task_id,
        "step": step,
        "seen_version": seen_version,
        "seen_failure_count": seen_failure_count,
        "complete_by": until,
    }
    return bool(await _run(session, rules.DEFER_STEP, params))


async def claim_cleanup(
    session: AsyncSession, task_id: str, seen_state: str, seen_version: int, version: int, at: datetime
) -> bool:
    """Mark a task whose workflow died Error, at ``version``, if its row is as the check read it."""
    params = {"task_id": task_id, "seen_state": seen_state, "seen_version": seen_version, "version": version, "at": at}
    return bool(await _run(session, rules.CLAIM_CLEANUP, params))


async def mark_step(
    session: AsyncSession,
    task_id: str,
    step: str,
    seen: tuple[str, int],
    to_step: str,
    to_task: str,
    at: datetime,
) -> bool:
    """An operator's mark: the step (if still in the state and version ``seen``) and its unfinished
    task move to ``to_step``/``to_task``; the version stays, so the workflow's next writes win."""
    params = {"task_id": task_id, "step": step, "seen_state": seen[0], "seen_version": seen[1], "at": at}
    if not await _run(session, rules.MARK_STEP, {**params, "state": to_step}):
        return False
    await _run(session, rules.MARK_TASK, {"task_id": task_id, "step": step, "state": to_task, "at": at})
    return True


def repair_version(seen_version: int, at: datetime, finished: bool) -> int:
    """The version a repair from Temporal writes: above the row's; for a finished workflow also
    above anything its runs wrote (stamped now), so a late write of theirs never undoes the
    repair - while a reset's new run, stamped later still, wins over it."""
    return max(seen_version + 1, version_of(int(at.timestamp() * 1000))) if finished else seen_version + 1


async def repair_step(
    session: AsyncSession,
    task_id: str,
    step: str,
    seen_version: int,
    version: int,
    state: str,
    at: datetime,
    *,
    failure_count: int | None = None,
    result: dict[str, Any] | None = None,
    note: str | None = None,
) -> bool:
    """Write what Temporal shows of a step over the row read at ``seen_version``."""
    params = {
        "task_id": task_id,
        "step": step,
        "seen_version": seen_version,
        "version": version,
        "state": state,
        "at": at,
        "failure_count": failure_count,
        "result": result,
        "note": note,
    }
    return bool(await _run(session, rules.REPAIR_STEP, params))


async def repair_task(
    session: AsyncSession, task_id: str, seen_version: int, version: int, state: str, at: datetime
) -> bool:
    """Write what Temporal shows of a task over the row read at ``seen_version``."""
    params = {"task_id": task_id, "seen_version": seen_version, "version": version, "state": state, "at": at}
    return bool(await _run(session, rules.REPAIR_TASK, params))


async def adopt_run(session: AsyncSession, task_id: str, chain_id: str, seen_run_id: str, run_id: str) -> bool:
    """Record that ``run_id``, a newer run of the task's chain, owns the task read at ``seen_run_id``."""
    params = {"task_id": task_id, "chain_id": chain_id, "seen_run_id": seen_run_id, "run_id": run_id}
    return bool(await _run(session, rules.ADOPT_RUN, params))


async def start_incarnation(
    session: AsyncSession,
    accepted: TaskAccepted,
    incarnation: int,
    resets: int,
    keys: dict[str, str],
    at: datetime,
    kept: Sequence[KeptStep] = (),
) -> bool:
    """Replace a finished task's rows (already archived) with its next incarnation's, Pending
    (a redrive's ``kept`` steps as they were), if the task is still the chain the operator
    resubmitted. FailureCount starts again at 0: the operator's reset, counted in ``resets``."""
    assert accepted.resubmission is not None, "an incarnation is started by a resubmission"
    restarted = await _run(
        session,
        rules.RESTART_TASK,
        {
            "task_id": accepted.task_id,
            "of": accepted.resubmission.of,
            "payload": accepted.payload,
            "chain_id": accepted.chain_id,
            "run_id": accepted.run_id,
            "incarnation": incarnation,
            "at": at,
        },
    )
    if not restarted:
        return False
    await _run(session, rules.DROP_STEPS, {"task_id": accepted.task_id})
    rows = rules.new_step_params(accepted, at, resets=resets, keys=keys, kept=kept)
    await _run(session, rules.STEP_INSERT[_backend(session)], rows)
    return True


async def record_audit(session: AsyncSession, record: AuditRecord) -> bool:
    """Write an operator action once (keyed by task, run and the run's transition).

    The actor is the request's ``by``, as given. A request that says it is the Supervisor's is
    recorded as such only if the decision it names vouches for it: a decision of the
    Supervisor's for this task, of this kind, on this step, that has vouched for no other
    entry. Otherwise the entry says why it is unverified; nothing a request claims ever
    replaces who it says it is from."""
    async with session.begin():
        exists = await session.execute(
            select(AuditEntry.id).where(
                AuditEntry.task_id == record.task_id, AuditEntry.run_id == record.run_id, AuditEntry.seq == record.seq
            )
        )
        if exists.first() is not None:
            return False
        entry = record.model_dump(exclude={"decision_id"})
        if record.actor == SUPERVISOR:
            decision, unverified = await _vouching_decision(session, record)
            if decision is not None:
                entry["decision_id"] = decision
            else:
                entry["actor"] = f"{SUPERVISOR} (unverified: {unverified})"[:_ACTOR_CHARS]
        session.add(AuditEntry(**entry))
        if record.action == REFUSED_RESULT:
            # The refusal and its alert land together: one write, so neither is seen without the other.
            await raise_refused_result(session, record.task_id, record.step, record.changed, record.at)
    return True


SUPERVISOR = "supervisor"
_ACTOR_CHARS = 200


async def _vouching_decision(session: AsyncSession, record: AuditRecord) -> tuple[int | None, str]:
    """The decision that makes ``record`` the Supervisor's, or None and why not."""
    claimed = record.decision_id
    if claimed is None or not claimed.isdigit():
        return None, "no such decision"
    found = (
        await session.execute(
            select(Decision.kind, Decision.step).where(Decision.id == int(claimed), Decision.task_id == record.task_id)
        )
    ).first()
    if found is None:
        return None, "no such decision"
    kind, step = found
    # A compensate undoes the task as a whole: its entry names no step, whichever step's
    # failure the decision was about.
    if kind != record.action or (step != record.step and not (kind == "compensate" and record.step is None)):
        return None, f"decision {claimed} was to {kind} {step}, not to {record.action} {record.step or '-'}"
    used = await session.execute(select(AuditEntry.id).where(AuditEntry.decision_id == int(claimed)))
    if used.first() is not None:
        return None, f"decision {claimed} was already carried out"
    return int(claimed), ""
