"""Sweep cost does not grow with the table: the scans are index range scans, shown by
the query planner of each backend (SQLite EXPLAIN QUERY PLAN, PostgreSQL EXPLAIN)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.mirror_tables import Step, Task
from sas.state_store.queries import due_steps, due_steps_query, stale_tasks_query

NOW = datetime(2030, 1, 1, tzinfo=UTC)
ROWS = 4000


async def _fill(conn: AsyncConnection) -> None:
    old = NOW - timedelta(days=30)
    tasks: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    for i in range(ROWS):
        task_id = f"t-{i:05d}"
        done = i % 100 != 0  # 1% are still in flight
        tasks.append(
            {
                "task_id": task_id,
                "task_type": "order",
                "workflow_type": "OrderWorkflow",
                "task_queue": "q",
                "state": "Processed" if done else "Processing",
                "current_step": "ship",
                "payload": {},
                "shard": i % 4096,
                "version": 1,
                "created_at": old,
                "updated_at": old + timedelta(seconds=i),
            }
        )
        steps.append(
            {
                "task_id": task_id,
                "name": "ship",
                "position": 0,
                "agent": "a",
                "compensation": None,
                "state": "Processed" if done else ("Failed" if i % 200 == 0 else "Processing"),
                "complete_by": None if done else old + timedelta(seconds=i),
                "failure_count": 0,
                "attempt": 1,
                "permanent": False,
                "idempotency_key": f"{task_id}:ship",
                "complete_by_s": 5.0,
                "version": 1,
                "updated_at": old,
                "shard": i % 4096,
            }
        )
    await conn.execute(insert(Task), tasks)
    await conn.execute(insert(Step), steps)


async def _plan(conn: AsyncConnection, statement) -> str:  # type: ignore[no-untyped-def]
    compiled = statement.compile(dialect=conn.dialect)
    sql = str(compiled)
    params = compiled.construct_params()
    values = []
    for name in compiled.positiontup or []:
        value = params[name]
        if isinstance(value, datetime) and conn.dialect.name == "sqlite":
            value = value.replace(tzinfo=None).isoformat(" ")
        values.append(value)
    prefix = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
    rows = (await conn.exec_driver_sql(prefix + sql, tuple(values))).all()
    return "\n".join(" ".join(str(c) for c in row) for row in rows)


async def test_supervisor_scans_use_their_indexes_not_the_table(db_url: str) -> None:
    await state_store.upgrade_async(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    try:
        async with engine.begin() as conn:
            await _fill(conn)
            if conn.dialect.name == "postgresql":
                await conn.execute(text("ANALYZE steps"))
                await conn.execute(text("ANALYZE tasks"))
        async with engine.connect() as conn:
            due = await _plan(conn, due_steps_query(NOW, timedelta(seconds=3), 100))
            sharded = await _plan(conn, due_steps_query(NOW, timedelta(seconds=3), 100, (0, 2048)))
            stale = await _plan(
                conn, stale_tasks_query("Processing", NOW, 50, (NOW - timedelta(days=40), "t"), (0, 2048))
            )
        for plan in (due, sharded):
            if engine.dialect.name == "sqlite":
                assert "USING INDEX ix_steps_state_complete_by (state=? AND complete_by<?)" in plan, plan
                assert "SCAN steps" not in plan, plan
            else:
                assert "ix_steps_state_complete_by" in plan, plan
                assert "Seq Scan on steps" not in plan, plan
        if engine.dialect.name == "sqlite":
            assert "USING INDEX ix_tasks_state_updated" in stale and "SCAN tasks" not in stale, stale
        else:
            assert "ix_tasks_state_updated" in stale and "Seq Scan on tasks" not in stale, stale

        sessions = state_store.session_factory(engine)
        async with sessions() as session:
            rows = await due_steps(session, NOW, timedelta(seconds=3), 10)
        assert len(rows) == 10 and all(s.state in ("Failed", "Processing") for s, _ in rows)
        async with sessions() as session:
            low = await due_steps(session, NOW, timedelta(seconds=3), 1000, (0, 2048))
            high = await due_steps(session, NOW, timedelta(seconds=3), 1000, (2048, 4096))
        assert {s.task_id for s, _ in low}.isdisjoint({s.task_id for s, _ in high})
        assert len(low) + len(high) == ROWS // 100
    finally:
        await engine.dispose()
