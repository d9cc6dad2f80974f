"""Bulk-loading mirror rows straight into a migrated state store, for the benches that measure
the Supervisor against more rows than real orders could make in a run (bench/sweep.py,
bench/supervisor_load.py --seeded-open).

``load_sqlite`` and ``load_postgres`` take a function giving the task and step rows of the step
indexes [lo, hi) and load them in chunks (SQLite: executemany, PostgreSQL: COPY), then ANALYZE, as
autovacuum/analyze would. ``open_rows`` gives healthy open orders: reserve and charge Processed,
ship Processing with its complete-by a day out, as written a moment ago."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sas.state_store.tables import shard_of

STEP_NAMES = ("reserve", "charge", "ship")
AGENTS = {"reserve": "inventory.reserve", "charge": "payment.charge", "ship": "shipping.ship"}
UNDO = {"reserve": "inventory.release", "charge": "payment.refund", "ship": "shipping.cancel"}

Rows = Callable[[int, int], tuple[list[dict], list[dict]]]
CHUNK = 100_000


def step_columns() -> list[str]:
    from sas.state_store.mirror_tables import Step

    return [c.name for c in Step.__table__.columns]


def task_columns() -> list[str]:
    from sas.state_store.mirror_tables import Task

    return [c.name for c in Task.__table__.columns]


def filled(columns: list[str], sample: dict) -> list[str]:
    """The table's columns that the rows fill: a column added since (nullable, or with a default)
    is left to the database, so a migration that adds one does not break the load; one that is
    required fails the insert, loudly."""
    return [c for c in columns if c in sample]


def task_row(task_id: str, state: str, current_step: str, at: datetime) -> dict:
    return {
        "task_id": task_id,
        "task_type": "order",
        "workflow_type": "OrderWorkflow",
        "task_queue": "sas-tasks",
        "state": state,
        "current_step": current_step,
        "payload": "{}",
        "shard": shard_of(task_id),
        "version": 0,
        "chain_id": f"chain-{task_id}",
        "run_id": f"run-{task_id}",
        "incarnation": 1,
        "created_at": at,
        "updated_at": at,
    }


def step_row(task_id: str, pos: int, state: str, complete_by: datetime | None, at: datetime) -> dict:
    name = STEP_NAMES[pos]
    return {
        "task_id": task_id,
        "name": name,
        "position": pos,
        "agent": AGENTS[name],
        "compensation": UNDO[name],
        "state": state,
        "locked_by": "worker-1@bench" if state == "Processing" else None,
        "complete_by": complete_by,
        "failure_count": 0,
        "resets": 0,
        "attempt": 1,
        "last_error": None,
        "error_type": None,
        "permanent": False,
        "chain_id": f"chain-{task_id}",
        "run_id": f"run-{task_id}",
        "result": None,
        "idempotency_key": f"{task_id}:{name}",
        "complete_by_s": 10.0,
        "version": 30000,
        "updated_at": at,
        "shard": shard_of(task_id),
    }


def open_rows(prefix: str, now: datetime) -> Rows:
    """Healthy open orders ``<prefix><n>``, three step rows each: nothing due for a day."""

    def rows(lo: int, hi: int) -> tuple[list[dict], list[dict]]:
        tasks, steps = [], []
        for i in range(lo, hi):
            t, pos = divmod(i, 3)
            task_id = f"{prefix}{t}"
            if pos == 0 or i == lo:
                tasks.append(task_row(task_id, "Processing", "ship", now))
            state, complete_by = ("Processing", now + timedelta(days=1)) if pos == 2 else ("Processed", None)
            steps.append(step_row(task_id, pos, state, complete_by, now))
        return tasks, steps

    return rows


# ------------------------------------------------------------------ SQLite


def _sqlite_ts(value: datetime | None) -> str | None:
    # SQLAlchemy's SQLite DATETIME storage format, naive UTC (see state_store.tables.UTCDateTime)
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


def load_sqlite(path: Path, start: int, stop: int, rows: Rows) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    for lo in range(start, stop, CHUNK):
        tasks, steps = rows(lo, min(lo + CHUNK, stop))
        tcols, scols = filled(task_columns(), tasks[0]), filled(step_columns(), steps[0])
        conv = lambda r, cols: tuple(_sqlite_ts(r[c]) if isinstance(r[c], datetime) else r[c] for c in cols)  # noqa: E731
        # a task row may already exist when a chunk starts mid-task
        conn.executemany(
            f"INSERT OR IGNORE INTO tasks ({','.join(tcols)}) VALUES ({','.join('?' * len(tcols))})",
            [conv(r, tcols) for r in tasks],
        )
        conn.executemany(
            f"INSERT INTO steps ({','.join(scols)}) VALUES ({','.join('?' * len(scols))})",
            [conv(r, scols) for r in steps],
        )
        conn.commit()
    conn.execute("ANALYZE")
    conn.commit()
    conn.close()


# -------------------------------------------------------------- PostgreSQL


async def load_postgres(dsn: str, start: int, stop: int, rows: Rows) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        for lo in range(start, stop, CHUNK):
            tasks, steps = rows(lo, min(lo + CHUNK, stop))
            tcols, scols = filled(task_columns(), tasks[0]), filled(step_columns(), steps[0])
            existing = await conn.fetchval("SELECT count(*) FROM tasks WHERE task_id = $1", tasks[0]["task_id"])
            if existing:
                tasks = tasks[1:]
            await conn.copy_records_to_table(
                "tasks", records=[tuple(r[c] for c in tcols) for r in tasks], columns=tcols
            )
            await conn.copy_records_to_table(
                "steps", records=[tuple(r[c] for c in scols) for r in steps], columns=scols
            )
        await conn.execute("ANALYZE tasks")
        await conn.execute("ANALYZE steps")
    finally:
        await conn.close()


async def load(url: str, start: int, stop: int, rows: Rows) -> None:
    """Either backend, by the state store's URL."""
    import asyncio

    if url.startswith("sqlite"):
        await asyncio.to_thread(load_sqlite, Path(url.split(":///", 1)[1]), start, stop, rows)
    else:
        await load_postgres(url, start, stop, rows)
