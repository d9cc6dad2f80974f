"""Every request a task applies is audited, whoever it says it is: the
state store records a request as the Supervisor's only if the decision it names exists for
that task; a request that only says ``by: supervisor`` is recorded as unverified. SQLite and
PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.state_store.mirror import record_audit
from sas.state_store.queries import audit_for
from sas.state_store.tables import Decision
from sas.task_models import AuditRecord
from tests.helpers import fresh_id

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def request(task_id: str, seq: int, actor: str, decision_id: str | None) -> AuditRecord:
    return AuditRecord(
        task_id=task_id,
        run_id="r1",
        seq=seq,
        step="charge",
        action="compensate",
        actor=actor,
        changed="task Failed -> Compensating",
        at=NOW,
        decision_id=decision_id,
    )


async def test_only_a_real_decision_makes_a_request_the_supervisors(sessions: async_sessionmaker[AsyncSession]) -> None:
    task_id, other = fresh_id("audit"), fresh_id("audit-other")
    async with sessions() as session, session.begin():
        decision = Decision(
            task_id=task_id,
            step="charge",
            failure_count=1,
            kind="compensate",
            observed_state="Failed",
            reason="permanent",
            decided_by="sup-1",
            decided_at=NOW,
        )
        session.add(decision)
        await session.flush()
        real = str(decision.id)
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 1, "supervisor", real))
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 2, "supervisor", None))  # says so, names nothing
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 3, "supervisor", "999999"))  # no such decision
    async with sessions() as session:
        assert await record_audit(session, request(other, 1, "supervisor", real))  # another task's decision
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 4, "alice", None))
    async with sessions() as session:
        actors = [e.actor for e in await audit_for(session, task_id)]
        elsewhere = [e.actor for e in await audit_for(session, other)]
    unverified = "supervisor (unverified: no such decision)"
    assert sorted(actors) == sorted(["supervisor", unverified, unverified, "alice"])
    assert elsewhere == [unverified]


async def decided(sessions: async_sessionmaker[AsyncSession], task_id: str, kind: str, step: str) -> str:
    async with sessions() as session, session.begin():
        decision = Decision(
            task_id=task_id,
            step=step,
            failure_count=1,
            kind=kind,
            observed_state="Failed",
            reason="the ladder",
            decided_by="sup-1",
            decided_at=NOW,
        )
        session.add(decision)
        await session.flush()
        return str(decision.id)


async def test_a_decision_vouches_only_for_its_own_kind_and_step_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """A compensate signal carrying an earlier *retry* decision's id is not the Supervisor's, nor
    is a second request carrying a decision that has already been carried out."""
    task_id = fresh_id("audit-kind")
    retry = await decided(sessions, task_id, "retry", "charge")
    other_step = await decided(sessions, task_id, "compensate", "ship")
    compensate = await decided(sessions, task_id, "compensate", "charge")
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 1, "supervisor", retry))  # kind differs
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 2, "supervisor", other_step))  # step differs
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 3, "supervisor", compensate))  # the real one
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 4, "supervisor", compensate))  # replayed
    async with sessions() as session:
        entries = sorted(await audit_for(session, task_id), key=lambda e: e.seq)
    assert [e.actor for e in entries] == [
        f"supervisor (unverified: decision {retry} was to retry charge, not to compensate charge)",
        f"supervisor (unverified: decision {other_step} was to compensate ship, not to compensate charge)",
        "supervisor",
        f"supervisor (unverified: decision {compensate} was already carried out)",
    ]


async def test_a_decision_never_replaces_who_the_request_is_from(sessions: async_sessionmaker[AsyncSession]) -> None:
    """A request from an operator that names a real Supervisor decision stays the operator's."""
    task_id = fresh_id("audit-by")
    compensate = await decided(sessions, task_id, "compensate", "charge")
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 1, "mallory", compensate))
    async with sessions() as session:
        assert [e.actor for e in await audit_for(session, task_id)] == ["mallory"]
    # The decision was not spent by that request: the Supervisor's own request still carries it out.
    async with sessions() as session:
        assert await record_audit(session, request(task_id, 2, "supervisor", compensate))
    async with sessions() as session:
        assert sorted(e.actor for e in await audit_for(session, task_id)) == ["mallory", "supervisor"]


async def test_a_compensate_of_the_whole_task_is_carried_out_by_its_decision(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """The Scheduler audits a compensate as the task's (no step): the decision about the failed
    step still vouches for it, once."""
    task_id = fresh_id("audit-task")
    compensate = await decided(sessions, task_id, "compensate", "ship")
    whole = request(task_id, 1, "supervisor", compensate).model_copy(update={"step": None})
    async with sessions() as session:
        assert await record_audit(session, whole)
    async with sessions() as session:
        assert [e.actor for e in await audit_for(session, task_id)] == ["supervisor"]
