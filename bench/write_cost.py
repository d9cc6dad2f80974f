"""CPU cost of one mirror write (an Agent's Processing or Processed) on each path.

    python bench/write_cost.py --writes 2000

Measures process CPU time per write (so other load on the machine matters little) for:
  session  what sas does now: ``record_transitions`` in an AsyncSession (ORM session,
           one transaction, UPDATE steps + UPDATE tasks);
  core     the same two UPDATE statements on an ``engine.begin()`` connection (Core, no
           ORM session);
  raw      the same two statements on the raw driver (aiosqlite / asyncpg), prepared.
SQLite (temporary file) and PostgreSQL (a fresh database on 127.0.0.1:5432, dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sweep import create_pg_database, drop_pg_database  # noqa: E402


async def measure(url: str, writes: int) -> dict[str, float]:
    import state_store
    from bench._activities import accept
    from settings import DatabaseSettings
    from state_store.mirror import _apply, record_transitions
    from task_models import StepTransition

    await state_store.upgrade_async(url)
    engine = state_store.create_engine(DatabaseSettings(url=url))
    sessions = state_store.session_factory(engine)
    ids = [f"w-{i}" for i in range(writes // 2)]
    for t in ids:
        await accept(sessions, t, {}, datetime.now(UTC), "BenchBareOrder", "q")

    def transitions(seq: int):
        for i, t in enumerate(ids):
            yield i, StepTransition(task_id=t, step="reserve", version=seq, state="Processing", at=datetime.now(UTC),
                                    locked_by="w", complete_by=datetime.now(UTC), task_state="Processing")

    out: dict[str, float] = {}

    async def run(name: str, write, seq: int) -> None:
        started = time.process_time()
        for _, tr in transitions(seq):
            await write(tr)
        out[name] = (time.process_time() - started) / len(ids) * 1000

    async def via_session(tr):
        async with sessions() as session:
            await record_transitions(session, [tr])

    async def via_core(tr):
        async with engine.begin() as conn:
            from sqlalchemy.ext.asyncio import AsyncSession

            await _apply(AsyncSession(bind=conn), tr)

    await run("session", via_session, 10)
    await run("session", via_session, 20)  # warm
    await run("core", via_core, 30)
    if url.startswith("sqlite"):
        import aiosqlite

        db = await aiosqlite.connect(state_store.engine.sqlite_path(url), isolation_level=None)

        async def via_raw(tr):
            ts = tr.at.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
            await db.execute("BEGIN IMMEDIATE")
            await db.execute("UPDATE steps SET state=?, version=?, updated_at=?, locked_by=?, complete_by=? "
                             "WHERE task_id=? AND name=? AND version<?",
                             (tr.state, tr.version, ts, tr.locked_by, ts, tr.task_id, tr.step, tr.version))
            await db.execute("UPDATE tasks SET state=?, current_step=?, version=?, updated_at=? WHERE task_id=? AND version<?",
                             (tr.task_state, tr.step, tr.version, ts, tr.task_id, tr.version))
            await db.execute("COMMIT")
    else:
        import asyncpg

        db = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))

        async def via_raw(tr):
            async with db.transaction():
                await db.execute("UPDATE steps SET state=$1, version=$2, updated_at=$3, locked_by=$4, complete_by=$3 "
                                 "WHERE task_id=$5 AND name=$6 AND version<$2",
                                 tr.state, tr.version, tr.at, tr.locked_by, tr.task_id, tr.step)
                await db.execute("UPDATE tasks SET state=$1, current_step=$2, version=$3, updated_at=$4 "
                                 "WHERE task_id=$5 AND version<$3", tr.task_state, tr.step, tr.version, tr.at, tr.task_id)
    await run("raw", via_raw, 40)
    await db.close()
    await engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--pg-admin-url", default=os.environ.get(
        "SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"))
    args = parser.parse_args()
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        res = asyncio.run(measure(f"sqlite+aiosqlite:///{tmp}/state.db", args.writes))
    summary.update({f"sqlite_{k}_cpu_ms": round(v, 3) for k, v in res.items()})
    name, url = asyncio.run(create_pg_database(args.pg_admin_url))
    try:
        res = asyncio.run(measure(url, args.writes))
    finally:
        asyncio.run(drop_pg_database(args.pg_admin_url, name))
    summary.update({f"postgres_{k}_cpu_ms": round(v, 3) for k, v in res.items()})
    print(" ".join(f"{k}={v}" for k, v in summary.items()), flush=True)


if __name__ == "__main__":
    main()
