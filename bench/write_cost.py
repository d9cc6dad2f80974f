"""CPU cost of one mirror write (an Agent's Processing or Processed) on each path.

    python bench/write_cost.py --writes 2000

Measures process CPU time per write (so other load on the machine matters little) for:
  session            ``record_transitions`` in an AsyncSession (ORM session, one transaction,
                     UPDATE steps + UPDATE tasks): the Scheduler's rarer writes (failures,
                     compensation) take this path;
  core               the same two UPDATE statements on an ``engine.begin()`` connection;
  writer             sas's hot path (``sas.state_store.agent_writes``), one write at a time;
  writer_64_at_once  the same with 64 writes in flight, as in a busy worker (on SQLite
                     they share one commit);
  accept             ``StepWriter.accept``: a task row and its three step rows.
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

from bench._stack import print_summary
from bench.sweep import create_pg_database, drop_pg_database


async def measure(url: str, writes: int) -> dict[str, float]:
    from bench._activities import accept
    from sas import state_store
    from sas.settings import DatabaseSettings
    from sas.state_store.agent_writes import make_step_writer
    from sas.state_store.mirror import _apply, record_transitions
    from sas.task_models import StepTransition

    await state_store.upgrade_async(url)
    engine = state_store.create_engine(DatabaseSettings(url=url))
    sessions = state_store.session_factory(engine)
    ids = [f"w-{i}" for i in range(writes // 2)]
    writer = make_step_writer(DatabaseSettings(url=url))
    for t in ids:
        await accept(writer, t, {}, datetime.now(UTC), "BenchBareOrder", "q")
    await writer.aclose()

    def transitions(seq: int):
        for i, t in enumerate(ids):
            yield (
                i,
                StepTransition(
                    task_id=t,
                    step="reserve",
                    version=seq,
                    state="Processing",
                    at=datetime.now(UTC),
                    locked_by="w",
                    complete_by=datetime.now(UTC),
                    task_state="Processing",
                ),
            )

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
    writer = make_step_writer(DatabaseSettings(url=url))
    await run("writer", writer.write, 40)

    async def concurrently(seq: int) -> None:
        # As in a busy worker: many Agents write at once (SQLite batches them into one commit).
        batch = [tr for _, tr in transitions(seq)]
        for i in range(0, len(batch), 64):
            await asyncio.gather(*(writer.write(tr) for tr in batch[i : i + 64]))

    started = time.process_time()
    await concurrently(50)
    out["writer_64_at_once"] = (time.process_time() - started) / len(ids) * 1000
    started = time.process_time()
    fresh = [f"a-{i}" for i in range(len(ids))]
    for t in fresh:
        await accept(writer, t, {"sku": "S"}, datetime.now(UTC), "BenchBareOrder", "q")
    out["accept"] = (time.process_time() - started) / len(fresh) * 1000
    await writer.aclose()
    await engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument(
        "--pg-admin-url",
        default=os.environ.get("SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
    )
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
    print_summary(summary, hard_exit=False)


if __name__ == "__main__":
    main()
