"""The state store's mirror writes, on SQLite and PostgreSQL: one transaction, idempotent, ordered."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sas.state_store.mirror import record_transitions
from sas.state_store.queries import get_task
from sas.state_store.tables import shard_of
from sas.task_models import StepPlan, StepPolicyValues, StepState, StepTransition, TaskAccepted, TaskState
from sas.task_models.versions import Phase, version_of
from tests.helpers import fresh_id

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def accepted(task_id: str, chain: str | None = None, run: str | None = None) -> TaskAccepted:
    return TaskAccepted(
        chain_id=chain,
        run_id=run or chain,
        task_id=task_id,
        task_type="order",
        workflow_type="OrderWorkflow",
        task_queue="q",
        payload={"sku": "S"},
        accepted_at=NOW,
        steps=[
            StepPlan(
                name=n,
                position=i,
                agent=f"svc.{n}",
                compensation=f"svc.un{n}",
                idempotency_key=f"{task_id}:{n}",
                policy=StepPolicyValues(complete_by_s=7),
            )
            for i, n in enumerate(["reserve", "charge"])
        ],
    )


def transition(
    task_id: str, seq: int, state: StepState, attempt: int = 0, phase: Phase = Phase.SCHEDULER, **kw
) -> StepTransition:
    return StepTransition(
        task_id=task_id,
        step="reserve",
        version=version_of(seq, attempt, phase),
        state=state,
        at=NOW + timedelta(seconds=seq),
        attempt=attempt or None,
        **kw,
    )


async def test_accept_writes_task_and_steps_once(sessions, writer) -> None:
    task_id = fresh_id("acc")
    assert (await writer.accept(accepted(task_id))).status == "new"
    # a retried accept (same chain of runs) changes nothing
    assert (await writer.accept(accepted(task_id))).status == "same_task"
    async with sessions() as s:
        record = await get_task(s, task_id)
    assert record is not None and record.task.state == TaskState.PENDING and record.task.created_at == NOW
    assert [(r.name, r.state, r.failure_count, r.complete_by_s, r.idempotency_key) for r in record.steps] == [
        ("reserve", "Pending", 0, 7.0, f"{task_id}:reserve"),
        ("charge", "Pending", 0, 7.0, f"{task_id}:charge"),
    ]
    # Every column the ORM reads back, as the ORM would have written it.
    assert (record.task.payload, record.task.shard, record.task.version, record.task.updated_at) == (
        {"sku": "S"},
        shard_of(task_id),
        0,
        NOW,
    )
    assert [
        (r.position, r.agent, r.compensation, r.shard, r.permanent, r.resets, r.locked_by, r.complete_by)
        for r in record.steps
    ] == [
        (0, "svc.reserve", "svc.unreserve", shard_of(task_id), False, 0, None, None),
        (1, "svc.charge", "svc.uncharge", shard_of(task_id), False, 0, None, None),
    ]


async def test_concurrent_writes_share_a_commit_but_fail_alone(sessions, writer) -> None:
    """Many Agents writing at once (one commit on SQLite): a write that cannot be stored
    fails on its own and the others land."""
    ids = [fresh_id("grp") for _ in range(40)]
    assert [o.status for o in await asyncio.gather(*(writer.accept(accepted(t)) for t in ids))] == ["new"] * len(ids)
    writes = [
        transition(t, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED, locked_by="w", task_state=TaskState.PROCESSING)
        for t in ids
    ]
    writes[7] = writes[7].model_copy(update={"version": 2**70})  # no database stores this integer
    outcomes = await asyncio.gather(*(writer.write(w) for w in writes), return_exceptions=True)
    assert [i for i, o in enumerate(outcomes) if isinstance(o, BaseException)] == [7]
    async with sessions() as s:
        records = [await get_task(s, t) for t in ids]
    states = [next(r.state for r in rec.steps if r.name == "reserve") for rec in records]  # type: ignore[union-attr]
    assert states == ["Processing"] * 7 + ["Pending"] + ["Processing"] * 32


async def test_a_failed_write_leaves_its_batch_as_if_it_had_not_been_there(sessions, writer) -> None:
    """On SQLite a batch in which one write fails is rolled back and applied again, each write
    alone: the accepts that shared its commit still find their tasks new, and are stored once."""
    ids = [fresh_id("rb") for _ in range(4)]
    await writer.accept(accepted(ids[0]))
    bad = transition(ids[0], 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED).model_copy(update={"version": 2**70})
    good = transition(ids[0], 2, StepState.PROCESSING, 1, Phase.AGENT_STARTED, task_state=TaskState.PROCESSING)
    outcomes = await asyncio.gather(
        writer.accept(accepted(ids[1])),
        writer.write(bad),
        writer.accept(accepted(ids[2])),
        writer.write(good),
        writer.accept(accepted(ids[3])),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], BaseException)
    assert [getattr(o, "status", o) for i, o in enumerate(outcomes) if i != 1] == ["new", "new", None, "new"]
    async with sessions() as s:
        records = [await get_task(s, t) for t in ids]
    assert all(r is not None and len(r.steps) == 2 for r in records)
    reserve = next(r for r in records[0].steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (reserve.state, reserve.version) == ("Processing", good.version)


async def test_writes_are_idempotent_and_a_late_older_write_never_wins(sessions, writer) -> None:
    task_id = fresh_id("ord")
    await writer.accept(accepted(task_id))
    started = transition(
        task_id,
        1,
        StepState.PROCESSING,
        1,
        Phase.AGENT_STARTED,
        locked_by="w1",
        complete_by=NOW + timedelta(seconds=7),
        task_state=TaskState.PROCESSING,
    )
    done = transition(task_id, 1, StepState.PROCESSED, 1, Phase.AGENT_DONE)
    async with sessions() as s:
        assert await record_transitions(s, [started]) == 1
    async with sessions() as s:
        assert await record_transitions(s, [done]) == 1
    async with sessions() as s:
        assert await record_transitions(s, [done]) == 0  # replayed: same row
        assert await record_transitions(s, [started]) == 0  # late and older: ignored
    async with sessions() as s:
        record = await get_task(s, task_id)
    step = next(r for r in record.steps if r.name == "reserve")  # type: ignore[union-attr]
    assert step.state == "Processed" and step.locked_by is None and step.complete_by is None
    assert step.version == version_of(1, 1, Phase.AGENT_DONE)
    assert record.task.state == "Processing" and record.task.current_step == "reserve"  # type: ignore[union-attr]


async def test_a_later_attempt_beats_an_earlier_attempts_late_success(sessions, writer) -> None:
    task_id = fresh_id("att")
    await writer.accept(accepted(task_id))
    second_started = transition(task_id, 1, StepState.PROCESSING, 2, Phase.AGENT_STARTED, locked_by="w2")
    first_done = transition(task_id, 1, StepState.PROCESSED, 1, Phase.AGENT_DONE)
    async with sessions() as s:
        await record_transitions(s, [second_started, first_done])
    async with sessions() as s:
        record = await get_task(s, task_id)
    reserve = next(r for r in record.steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (reserve.state, reserve.locked_by, reserve.attempt) == ("Processing", "w2", 2)


async def test_failure_count_never_goes_back(sessions, writer) -> None:
    task_id = fresh_id("fc")
    await writer.accept(accepted(task_id))
    async with sessions() as s:
        await record_transitions(
            s, [transition(task_id, 1, StepState.FAILED, failure_count=3, last_error="boom", error_type="X")]
        )
    async with sessions() as s:
        await record_transitions(
            s, [transition(task_id, 2, StepState.PROCESSING, 1, Phase.AGENT_STARTED, failure_count=1)]
        )
    async with sessions() as s:
        record = await get_task(s, task_id)
    reserve = next(r for r in record.steps if r.name == "reserve")  # type: ignore[union-attr]
    assert reserve.failure_count == 3 and reserve.state == "Processing"


async def test_agent_writes_follow_the_same_rules(sessions, writer) -> None:
    """The Agents' driver-level writes: ordered, idempotent, FailureCount kept, errors cleared on success."""
    task_id = fresh_id("fast")
    await writer.accept(accepted(task_id))
    async with sessions() as s:
        await record_transitions(
            s, [transition(task_id, 1, StepState.FAILED, failure_count=2, last_error="boom", error_type="X")]
        )
    started = transition(
        task_id,
        2,
        StepState.PROCESSING,
        1,
        Phase.AGENT_STARTED,
        locked_by="w1",
        failure_count=0,
        complete_by=NOW + timedelta(seconds=9),
        task_state=TaskState.PROCESSING,
    )
    done = transition(task_id, 2, StepState.PROCESSED, 1, Phase.AGENT_DONE, failure_count=0)
    await writer.write(started)
    async with sessions() as s:
        mid = next(r for r in (await get_task(s, task_id)).steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (mid.state, mid.locked_by, mid.complete_by, mid.failure_count, mid.last_error) == (
        "Processing",
        "w1",
        NOW + timedelta(seconds=9),
        2,
        "boom",
    )
    await writer.write(done)
    await writer.write(started)  # late and older: ignored
    await writer.write(done)  # replayed: same row
    async with sessions() as s:
        record = await get_task(s, task_id)
    reserve = next(r for r in record.steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (reserve.state, reserve.locked_by, reserve.complete_by, reserve.attempt) == ("Processed", None, None, 1)
    assert reserve.failure_count == 2 and reserve.last_error is None and reserve.error_type is None
    assert reserve.version == version_of(2, 1, Phase.AGENT_DONE)
    assert record.task.state == "Processing" and record.task.version == version_of(2, 1, Phase.AGENT_STARTED)  # type: ignore[union-attr]


async def test_an_undone_step_keeps_its_last_error(sessions, writer) -> None:
    """After compensation an operator can still see what failed: the Agent's and the
    Scheduler's Compensated writes keep last_error and error_type."""
    task_id = fresh_id("undone")
    await writer.accept(accepted(task_id))
    async with sessions() as s:
        await record_transitions(
            s, [transition(task_id, 1, StepState.FAILED, failure_count=1, last_error="card declined", error_type="X")]
        )
    await writer.write(transition(task_id, 2, StepState.COMPENSATED, 1, Phase.AGENT_DONE))
    async with sessions() as s:
        by_agent = next(r for r in (await get_task(s, task_id)).steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (by_agent.state, by_agent.last_error, by_agent.error_type) == ("Compensated", "card declined", "X")
    async with sessions() as s:
        await record_transitions(s, [transition(task_id, 3, StepState.COMPENSATED)])
        by_scheduler = next(r for r in (await get_task(s, task_id)).steps if r.name == "reserve")  # type: ignore[union-attr]
    assert (by_scheduler.state, by_scheduler.last_error) == ("Compensated", "card declined")


async def test_an_id_belongs_to_one_chain_of_runs(sessions, writer) -> None:
    """A run of another chain (the id reused after the task finished) is refused and changes
    nothing; a run of the same chain (a reset) takes the rows over, and its writes apply
    while the other chain's are refused."""
    task_id = fresh_id("own")
    assert (await writer.accept(accepted(task_id, chain="chain-a"))).status == "new"
    done = transition(
        task_id, 5, StepState.PROCESSED, task_state=TaskState.PROCESSED, run_id="chain-a", chain_id="chain-a"
    )
    await writer.write(done)
    outcome = await writer.accept(accepted(task_id, chain="chain-b"))
    assert (outcome.status, outcome.state) == ("other_task", "Processed")
    # The other chain's writes never land, whatever their version.
    await writer.write(
        transition(task_id, 9, StepState.COMPENSATED, task_state=TaskState.COMPENSATED, run_id="b", chain_id="chain-b")
    )
    async with sessions() as s:
        record = await get_task(s, task_id)
    assert record is not None and record.task.state == "Processed" and record.task.run_id == "chain-a"
    assert next(r.state for r in record.steps if r.name == "reserve") == "Processed"
    # A reset run of chain a (new run id, same chain) takes over.
    outcome = await writer.accept(accepted(task_id, chain="chain-a", run="run-2"))
    assert outcome.status == "same_task"
    await writer.write(
        transition(task_id, 7, StepState.PROCESSING, 1, Phase.AGENT_STARTED, run_id="run-2", chain_id="chain-a")
    )
    async with sessions() as s:
        record = await get_task(s, task_id)
    assert record is not None and record.task.run_id == "run-2"
    reserve = next(r for r in record.steps if r.name == "reserve")
    assert (reserve.state, reserve.run_id) == ("Processing", "run-2")


async def test_a_legacy_row_is_adopted_only_while_unfinished(sessions, writer) -> None:
    """Rows accepted before chains were recorded: a reset of an unfinished task adopts them;
    a finished task is never re-run by an id it cannot prove is its own."""
    running, finished = fresh_id("leg"), fresh_id("leg")
    for task_id in (running, finished):
        assert (await writer.accept(accepted(task_id))).status == "new"
    await writer.write(transition(finished, 3, StepState.PROCESSED, task_state=TaskState.COMPENSATED))
    assert (await writer.accept(accepted(running, chain="c1"))).status == "same_task"
    assert (await writer.accept(accepted(finished, chain="c2"))).status == "other_task"
    async with sessions() as s:
        adopted = await get_task(s, running)
    assert adopted is not None and adopted.task.chain_id == "c1" and {r.chain_id for r in adopted.steps} == {"c1"}


async def test_control_characters_in_relayed_text_are_stored_cleaned(sessions, writer) -> None:
    """A remote service's error text (or an actor's name) may carry NUL, which PostgreSQL refuses:
    every text that reaches the store is cleaned first, so the write lands instead of retrying for ever."""
    from sas.state_store.mirror import record_audit
    from sas.state_store.queries import audit_for
    from sas.task_models import AuditRecord

    task_id = fresh_id("nul")
    await writer.accept(accepted(task_id))
    failed = transition(
        task_id, 2, StepState.FAILED, last_error="card\x00declined\x1b[31m", error_type="Remote\x00Error",
        locked_by="w\x00", task_state=TaskState.FAILED,
    )  # fmt: skip
    async with sessions() as s:
        assert await record_transitions(s, [failed]) == 1
        assert await record_audit(
            s,
            AuditRecord(task_id=task_id, run_id="r", seq=1, action="retry", actor="al\x00ice", reason="x\x00",
                        changed="y\x07", at=NOW),
        )  # fmt: skip
    async with sessions() as s:
        record = await get_task(s, task_id)
        audit = await audit_for(s, task_id)
    assert record is not None
    reserve = next(r for r in record.steps if r.name == "reserve")
    assert (reserve.last_error, reserve.error_type) == ("card\ufffddeclined\ufffd[31m", "Remote\ufffdError")
    assert [(a.actor, a.reason, a.changed) for a in audit] == [("al\ufffdice", "x\ufffd", "y\ufffd")]


async def test_an_agents_write_keeps_its_step_task_and_attempt_together(sessions, writer) -> None:
    """An Agent's write that starts an attempt moves the step row, the task row when it carries
    a task state, and keeps the attempt's row: the attempt only if the step write applied (on
    PostgreSQL the three are one statement, on SQLite one transaction)."""
    from sqlalchemy import select

    from sas.state_store.tables import StepAttempt

    task_id = fresh_id("agw")
    await writer.accept(accepted(task_id))
    started = transition(
        task_id, 2, StepState.PROCESSING, 1, Phase.AGENT_STARTED, locked_by="w1", task_state=TaskState.PROCESSING
    )
    stale = transition(
        task_id, 1, StepState.PROCESSING, 9, Phase.AGENT_STARTED, locked_by="w9", task_state=TaskState.FAILED
    )
    done = transition(task_id, 3, StepState.PROCESSED, 1, Phase.AGENT_DONE, task_state=TaskState.PROCESSED)
    await writer.write(started)
    await writer.write(stale)
    async with sessions() as s:
        record = await get_task(s, task_id)
        kept = (
            await s.execute(select(StepAttempt.attempt, StepAttempt.locked_by).where(StepAttempt.task_id == task_id))
        ).all()
    assert record is not None
    reserve = next(r for r in record.steps if r.name == "reserve")
    assert (reserve.state, reserve.locked_by, reserve.version) == ("Processing", "w1", started.version)
    assert (record.task.state, record.task.current_step, record.task.version) == (
        "Processing",
        "reserve",
        started.version,
    )
    assert [tuple(row) for row in kept] == [(1, "w1")]  # not the stale attempt 9

    await writer.write(done)
    await writer.write(started)  # replayed after it: changes nothing, adds no attempt
    async with sessions() as s:
        record = await get_task(s, task_id)
        kept = (await s.execute(select(StepAttempt.attempt).where(StepAttempt.task_id == task_id))).all()
    assert record is not None
    reserve = next(r for r in record.steps if r.name == "reserve")
    assert (reserve.state, record.task.state, record.task.version) == ("Processed", "Processed", done.version)
    assert len(kept) == 1
