"""The state store's production paths on PostgreSQL: the same migrations, concurrent
writers from several engines (as several worker processes would), version ordering,
connection-pool settings and the Supervisor's scan."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.mirror import record_transitions
from sas.state_store.queries import due_steps, get_task
from sas.task_models import AcceptOutcome, StepPlan, StepPolicyValues, StepTransition, TaskAccepted
from sas.task_models.versions import Phase, version_of
from tests.helpers import fresh_id

STEPS = [("reserve", "inventory.reserve"), ("charge", "payment.charge"), ("ship", "shipping.ship")]


def _accepted(task_id: str) -> TaskAccepted:
    return TaskAccepted(
        task_id=task_id,
        task_type="order",
        workflow_type="OrderWorkflow",
        task_queue="q",
        payload={"x": 1},
        steps=[
            StepPlan(name=n, position=i, agent=a, idempotency_key=f"{task_id}:{n}", policy=StepPolicyValues())
            for i, (n, a) in enumerate(STEPS)
        ],
        accepted_at=datetime.now(UTC),
    )


def _t(
    task_id: str, step: str, seq: int, state: str, attempt: int = 0, phase: Phase = Phase.SCHEDULER, **kw
) -> StepTransition:
    return StepTransition(
        task_id=task_id, step=step, version=version_of(seq, attempt, phase), state=state, at=datetime.now(UTC), **kw
    )


async def test_concurrent_writers_on_postgres_keep_the_newest_write(pg_url: str) -> None:
    await state_store.upgrade_async(pg_url)
    await state_store.upgrade_async(pg_url)  # idempotent, as every process runs it at start-up
    engines = [
        state_store.create_engine(DatabaseSettings(url=pg_url, pool_size=2, max_overflow=1, pool_timeout_s=10))
        for _ in range(3)
    ]
    makers = [state_store.session_factory(e) for e in engines]
    writers = [make_step_writer(DatabaseSettings(url=pg_url, pool_size=2)) for _ in range(3)]
    try:
        ids = [fresh_id("pg") for _ in range(20)]

        async def accept(i: int, task_id: str) -> AcceptOutcome:
            return await writers[i % 3].accept(_accepted(task_id))

        # accepted concurrently from different "processes"; a replayed accept changes nothing
        first = await asyncio.gather(*(accept(i, t) for i, t in enumerate(ids)))
        assert [o.status for o in first] == ["new"] * len(ids)
        again = await asyncio.gather(*(accept(i + 1, t) for i, t in enumerate(ids)))
        assert [o.status for o in again] == ["same_task"] * len(ids)

        # each task's writes, shuffled and spread over the engines: the highest version wins
        writes = []
        for task_id in ids:
            for seq, (step, _) in enumerate(STEPS, start=1):
                writes.append(
                    (
                        task_id,
                        [
                            _t(
                                task_id,
                                step,
                                seq,
                                "Processing",
                                1,
                                Phase.AGENT_STARTED,
                                locked_by="w",
                                complete_by=datetime.now(UTC) + timedelta(seconds=10),
                            )
                        ],
                    )
                )
                writes.append(
                    (
                        task_id,
                        [
                            _t(
                                task_id,
                                step,
                                seq,
                                "Processed",
                                1,
                                Phase.AGENT_DONE,
                                task_state="Processed" if step == "ship" else None,
                            )
                        ],
                    )
                )
        random.Random(7).shuffle(writes)

        async def write(i: int, batch: list[StepTransition]) -> int:
            async with makers[i % 3]() as session:
                return await record_transitions(session, batch)

        await asyncio.gather(*(write(i, batch) for i, (_, batch) in enumerate(writes)))
        async with makers[0]() as session:
            for task_id in ids:
                record = await get_task(session, task_id)
                assert record is not None
                assert [s.state for s in record.steps] == ["Processed"] * 3
                assert record.task.state == "Processed"
                assert all(s.locked_by is None for s in record.steps)
    finally:
        for engine in engines:
            await engine.dispose()
        for writer in writers:
            await writer.aclose()


async def test_supervisor_scan_on_postgres_finds_due_steps_only(pg_url: str) -> None:
    await state_store.upgrade_async(pg_url)
    engine = state_store.create_engine(DatabaseSettings(url=pg_url))
    sessions = state_store.session_factory(engine)
    writer = make_step_writer(DatabaseSettings(url=pg_url))
    now = datetime.now(UTC)
    try:
        due, fine = fresh_id("due"), fresh_id("fine")
        await writer.accept(_accepted(due))
        await writer.accept(_accepted(fine))
        async with sessions() as session:
            await record_transitions(
                session,
                [
                    _t(
                        due,
                        "reserve",
                        1,
                        "Failed",
                        failure_count=1,
                        last_error="boom",
                        error_type="RemoteTransient",
                        complete_by=now - timedelta(seconds=1),
                        task_state="Failed",
                    ),
                    _t(due, "charge", 1, "Processing", locked_by="dead", complete_by=now - timedelta(seconds=60)),
                    _t(fine, "reserve", 1, "Processing", locked_by="alive", complete_by=now + timedelta(seconds=60)),
                    _t(fine, "charge", 1, "Processed"),
                ],
            )
        async with sessions() as session:
            found = await due_steps(session, now, timedelta(seconds=3), 100)
        assert sorted((s.task_id, s.name, s.state) for s, _ in found) == [
            (due, "charge", "Processing"),
            (due, "reserve", "Failed"),
        ]
        assert all(task.task_id == due for _, task in found)
    finally:
        await writer.aclose()
        await engine.dispose()
