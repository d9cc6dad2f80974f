"""Supervisor sweep time against the number of step rows stored.

    python bench/sweep.py                      # 1e4, 1e5, 1e6 rows; SQLite and PostgreSQL
    python bench/sweep.py --backends sqlite --sizes 1e4,1e5 --runs 9

For each backend: migrate a fresh database with ``sas.state_store.upgrade``, bulk-load
step rows (3 per task) to each size in turn, 100 of them due (50 Failed with a
CompleteBy in the past, 50 Processing past CompleteBy + grace), 1,000 more in flight
(Processing, CompleteBy in the future), the rest Processed. Then time the Supervisor's
own scan, ``sas.state_store.queries.due_steps(session, now, grace, 100)`` (one shard, as
by default; ``--shards 4`` times shard 0's range), over ``--runs`` runs after one warm
run, and check it returns exactly the 100 due rows. Tables are ANALYZEd after each
load, as autovacuum/analyze would. Growth = t(largest) / t(smallest) (medians).

PostgreSQL: ``--pg-admin-url`` (default $SAS_TEST_PG_URL or the server on 127.0.0.1:5432);
a fresh database is created and dropped. Prints one line per backend and a final
summary line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._seed import Rows, load_postgres, load_sqlite, step_row, task_row
from bench._stack import install_signal_exit, print_summary

DUE_FAILED, DUE_OVERDUE, IN_FLIGHT = 50, 50, 1000
GRACE = timedelta(seconds=3)


def rows(now: datetime, run: str) -> Rows:
    """Task and step rows for step indexes [start, stop): the first 100 steps are due and
    the next IN_FLIGHT are in flight (only present when the first load includes them)."""
    day_ago = now - timedelta(days=1)

    def chunk(start: int, stop: int) -> tuple[list[dict], list[dict]]:
        tasks, steps = [], []
        for i in range(start, stop):
            t, pos = divmod(i, 3)
            task_id = f"{run}-{t}"
            if pos == 0 or i == start:
                tasks.append(task_row(task_id, "Processed", "ship", day_ago))
            if i < DUE_FAILED:
                state, complete_by = "Failed", now - timedelta(seconds=60 + i)
            elif i < DUE_FAILED + DUE_OVERDUE:
                state, complete_by = "Processing", now - timedelta(seconds=600 + i)
            elif i < DUE_FAILED + DUE_OVERDUE + IN_FLIGHT:
                state, complete_by = "Processing", now + timedelta(hours=1, seconds=i)
            else:
                state, complete_by = "Processed", None
            steps.append(step_row(task_id, pos, state, complete_by, day_ago))
        return tasks, steps

    return chunk


# ------------------------------------------------------------------ timing


async def time_scan(url: str, runs: int, shards: int, explain: bool) -> tuple[float, str]:
    from sas import state_store
    from sas.settings import DatabaseSettings, SupervisorSettings
    from sas.state_store.queries import due_steps, due_steps_query

    engine = state_store.create_engine(DatabaseSettings(url=url))
    sessions = state_store.session_factory(engine)
    buckets = None if shards == 1 else SupervisorSettings(shards=shards).bucket_range(0)
    times = []
    plan = ""
    try:
        for i in range(runs + 1):
            async with sessions() as session:
                started = time.perf_counter()
                found = await due_steps(session, datetime.now(UTC), GRACE, 100, buckets)
                elapsed = time.perf_counter() - started
            if shards == 1 and len(found) != 100:
                raise AssertionError(f"the scan found {len(found)} due steps, not 100")
            if i:
                times.append(elapsed)
        if explain:
            from sqlalchemy import text

            query = due_steps_query(datetime.now(UTC), GRACE, 100, buckets)
            async with engine.connect() as conn:
                compiled = query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
                prefix = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
                result = await conn.execute(text(prefix + str(compiled)))
                plan = "\n".join(" ".join(str(c) for c in row) for row in result)
    finally:
        await engine.dispose()
    return statistics.median(times), plan


async def create_pg_database(admin_url: str) -> tuple[str, str]:
    import asyncpg

    name = f"sas_bench_sweep_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(admin_url.replace("postgresql+asyncpg://", "postgresql://"), timeout=5)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return name, admin_url.rsplit("/", 1)[0] + f"/{name}"


async def drop_pg_database(admin_url: str, name: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(admin_url.replace("postgresql+asyncpg://", "postgresql://"), timeout=5)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def bench_backend(backend: str, sizes: list[int], args: argparse.Namespace) -> dict[str, float]:
    from sas import state_store

    run = uuid.uuid4().hex[:6]
    now = datetime.now(UTC)
    tmp = Path(tempfile.mkdtemp(prefix="sas-sweep-"))
    pg_name = None
    try:
        if backend == "sqlite":
            path = tmp / "state.db"
            url = f"sqlite+aiosqlite:///{path}"
        else:
            pg_name, url = asyncio.run(create_pg_database(args.pg_admin_url))
        state_store.upgrade(url)
        loaded = 0
        out: dict[str, float] = {}
        for size in sizes:
            started = time.monotonic()
            if backend == "sqlite":
                load_sqlite(path, loaded, size, rows(now, run))
            else:
                asyncio.run(load_postgres(url, loaded, size, rows(now, run)))
            loaded = size
            load_s = time.monotonic() - started
            t, plan = asyncio.run(time_scan(url, args.runs, args.shards, args.explain))
            out[f"t{size:.0e}".replace("+0", "").replace("+", "")] = t
            print(f"  {backend} rows={size} load_s={load_s:.1f} scan_ms={t * 1000:.3f}", flush=True)
            if plan:
                print("    plan: " + plan.replace("\n", "\n          "), flush=True)
        first, last = out[next(iter(out))], out[list(out)[-1]]
        out["growth"] = last / first
        return out
    finally:
        if pg_name:
            asyncio.run(drop_pg_database(args.pg_admin_url, pg_name))
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e4,1e5,1e6", help="step-row counts, ascending (default 1e4,1e5,1e6)")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both (default)")
    parser.add_argument("--runs", type=int, default=21, help="timed scans per size; the median counts (default 21)")
    parser.add_argument("--shards", type=int, default=1, help="Supervisor shards; >1 times shard 0's range (default 1)")
    parser.add_argument("--explain", action="store_true", help="print the query plan at each size")
    parser.add_argument(
        "--pg-admin-url",
        default=os.environ.get("SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    install_signal_exit()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    if sizes != sorted(sizes) or sizes[0] < DUE_FAILED + DUE_OVERDUE + IN_FLIGHT:
        parser.error(f"sizes must ascend and start at >= {DUE_FAILED + DUE_OVERDUE + IN_FLIGHT}")
    summary: dict[str, object] = {}
    results = {}
    for backend in args.backends.split(","):
        if backend not in ("sqlite", "postgres"):
            parser.error(f"unknown backend {backend!r}")
        out = bench_backend(backend, sizes, args)
        results[backend] = out
        figures = " ".join(f"{k}_ms={v * 1000:.3f}" for k, v in out.items() if k != "growth")
        print(f"backend={backend} growth={out['growth']:.2f} {figures}", flush=True)
        summary[f"{backend}_growth"] = round(out["growth"], 2)
        for k, v in out.items():
            if k != "growth":
                summary[f"{backend}_{k}_ms"] = round(v * 1000, 3)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print_summary(summary, hard_exit=False)


if __name__ == "__main__":
    main()
