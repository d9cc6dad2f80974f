"""CPU cost of one mirror write (an Agent's Processing or Processed) on each path.

    python bench/write_cost.py --writes 2000

Measures process CPU time per write (so other load on the machine matters less) for:
  session            ``record_transitions`` in an AsyncSession (ORM session, one transaction,
                     UPDATE steps + UPDATE tasks): the Scheduler's rarer writes (failures,
                     compensation) take this path;
  core               the same two UPDATE statements on an ``engine.begin()`` connection;
  writer             sas's hot path (``state_store.agent_writes``), one write at a time;
  writer_64_at_once  the same with 64 writes in flight, as in a busy worker (they share
                     one commit);
  agent_64_at_once   the Agents' own writes as a worker makes them, 64 in flight: half
                     Processing with LockedBy (and the attempt's row), half Processed with
                     the step's result;
  accept             ``StepWriter.accept``: a task row and its three step rows;
  accept_64_at_once  the same, 64 in flight.
SQLite (temporary file) and PostgreSQL (a fresh database on 127.0.0.1:5432, dropped after).
On PostgreSQL, ``…_server_cpu_ms`` is the CPU of the server's backends serving the database
(when the server runs on this machine): it shares the cores with the worker.
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


def _proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServerCpu:
    """CPU of the PostgreSQL backends serving ``url``'s database (0 on SQLite, or a remote server)."""

    def __init__(self, url: str) -> None:
        self._url = url if url.startswith("postgresql") else None

    async def backends(self) -> list[int]:
        if self._url is None:
            return []
        import asyncpg

        conn = await asyncpg.connect(self._url.replace("postgresql+asyncpg://", "postgresql://"))
        try:
            rows = await conn.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await conn.close()
        return [r["pid"] for r in rows]

    async def start(self) -> dict[int, float]:
        return {pid: _proc_cpu_s(pid) for pid in await self.backends()}

    async def since(self, before: dict[int, float]) -> float:
        return sum(_proc_cpu_s(pid) - before.get(pid, 0.0) for pid in set(await self.backends()) | set(before))


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
    server = ServerCpu(url)

    async def timed(name: str, n: int, work) -> None:  # type: ignore[no-untyped-def]
        before = await server.start()
        started = time.process_time()
        await work()
        out[name] = (time.process_time() - started) / n * 1000
        if url.startswith("postgresql"):
            out[f"{name}_server"] = await server.since(before) / n * 1000

    async def run(name: str, write, seq: int) -> None:
        async def work() -> None:
            for _, tr in transitions(seq):
                await write(tr)

        await timed(name, len(ids), work)

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

    await timed("writer_64_at_once", len(ids), lambda: concurrently(50))

    def agent_write(i: int, t: str, seq: int) -> StepTransition:
        # As activities/agent.py writes them: an attempt's start (LockedBy, CompleteBy, attempt: it
        # also keeps the attempt's row), or its success (the step's result, the error cleared).
        now = datetime.now(UTC)
        common = {"task_id": t, "step": "reserve", "version": seq, "at": now, "attempt": 1, "failure_count": 0}
        if i % 2 == 0:
            return StepTransition(
                **common, state="Processing", locked_by="w", complete_by=now, task_state="Processing", run_id="r"
            )
        return StepTransition(**common, state="Processed", result={"reservation_id": f"res-{t}"}, run_id="r")

    async def agents() -> None:
        batch = [agent_write(i, t, 60 + i % 2) for i, t in enumerate(ids)]
        for i in range(0, len(batch), 64):
            await asyncio.gather(*(writer.write(tr) for tr in batch[i : i + 64]))

    await timed("agent_64_at_once", len(ids), agents)
    fresh = [f"a-{i}" for i in range(len(ids))]

    async def accepts() -> None:
        for t in fresh:
            await accept(writer, t, {"sku": "S"}, datetime.now(UTC), "BenchBareOrder", "q")

    await timed("accept", len(fresh), accepts)
    many = [f"m-{i}" for i in range(len(ids))]

    async def accepts_at_once() -> None:
        for i in range(0, len(many), 64):
            await asyncio.gather(
                *(accept(writer, t, {"sku": "S"}, datetime.now(UTC), "BenchBareOrder", "q") for t in many[i : i + 64])
            )

    await timed("accept_64_at_once", len(many), accepts_at_once)
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
