"""The Agents' own writes - Processing when an attempt starts, Processed when it succeeds -
on the database driver directly.

They are the hot path: two per step, seven per order. Through an ORM session each cost
about 4 ms of CPU; as one prepared UPDATE on a kept-open connection, about 0.4 ms
(bench/write_cost.py, docs/benchmarks.md). They write the same columns under the same rules
as ``state_store.mirror.record_transitions``: a write applies only if its version is newer,
FailureCount never goes down, and a success clears the last error.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.engine import make_url

from settings import DatabaseSettings
from state_store.engine import sqlite_path
from task_models import StepState, StepTransition

_SUCCESS = (StepState.PROCESSED, StepState.COMPENSATED)


class StepWriter(Protocol):
    async def write(self, t: StepTransition) -> None: ...

    async def aclose(self) -> None: ...


def make_step_writer(db: DatabaseSettings) -> StepWriter:
    path = sqlite_path(db.url)
    return SqliteStepWriter(str(path)) if path is not None else PostgresStepWriter(db)


class SqliteStepWriter:
    _STEP = (
        "UPDATE steps SET state=?, version=?, updated_at=?, locked_by=?, complete_by=?, attempt=COALESCE(?, attempt),"
        " failure_count=MAX(failure_count, COALESCE(?, failure_count)),"
        " last_error=CASE WHEN ? THEN NULL ELSE last_error END, error_type=CASE WHEN ? THEN NULL ELSE error_type END"
        " WHERE task_id=? AND name=? AND version<?"
    )
    _TASK = "UPDATE tasks SET state=?, current_step=?, version=?, updated_at=? WHERE task_id=? AND version<?"

    def __init__(self, path: str) -> None:
        self._path = path
        self._db: Any = None
        # One connection, one writer at a time: SQLite serialises writers anyway.
        self._lock = asyncio.Lock()

    async def write(self, t: StepTransition) -> None:
        import aiosqlite

        async with self._lock:
            if self._db is None:
                self._db = await aiosqlite.connect(self._path, isolation_level=None, timeout=30)
                for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
                    await self._db.execute(f"PRAGMA {pragma}")
            ok = t.state in _SUCCESS
            at = _naive(t.at)
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                await self._db.execute(self._STEP, (str(t.state), t.version, at, t.locked_by, _naive(t.complete_by),
                                                    t.attempt, t.failure_count, ok, ok, t.task_id, t.step, t.version))
                if t.task_state is not None:
                    await self._db.execute(self._TASK, (str(t.task_state), t.step, t.version, at, t.task_id, t.version))
                await self._db.execute("COMMIT")
            except BaseException:
                await self._reset()
                raise

    async def _reset(self) -> None:
        # After a failure the connection's state is unknown: start again with a new one.
        db, self._db = self._db, None
        if db is not None:
            try:
                await db.close()
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    async def aclose(self) -> None:
        async with self._lock:
            await self._reset()


class PostgresStepWriter:
    _STEP = (
        "UPDATE steps SET state=$1, version=$2, updated_at=$3, locked_by=$4, complete_by=$5,"
        " attempt=COALESCE($6, attempt), failure_count=GREATEST(failure_count, COALESCE($7, failure_count)),"
        " last_error=CASE WHEN $8 THEN NULL ELSE last_error END, error_type=CASE WHEN $8 THEN NULL ELSE error_type END"
        " WHERE task_id=$9 AND name=$10 AND version<$2"
    )
    _TASK = "UPDATE tasks SET state=$1, current_step=$2, version=$3, updated_at=$4 WHERE task_id=$5 AND version<$3"

    def __init__(self, db: DatabaseSettings) -> None:
        url = make_url(db.url)
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False).split("?")[0]
        self._ssl = url.query.get("ssl") or url.query.get("sslmode")
        self._size = db.pool_size
        self._pool: Any = None
        self._starting = asyncio.Lock()

    async def write(self, t: StepTransition) -> None:
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(self._STEP, str(t.state), t.version, t.at, t.locked_by, t.complete_by, t.attempt,
                               t.failure_count, t.state in _SUCCESS, t.task_id, t.step)
            if t.task_state is not None:
                await conn.execute(self._TASK, str(t.task_state), t.step, t.version, t.at, t.task_id)

    async def _get_pool(self) -> Any:
        import asyncpg

        async with self._starting:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self._size, ssl=self._ssl)
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


def _naive(value: datetime | None) -> str | None:
    """SQLite stores UTC as text in the format SQLAlchemy's DateTime uses (see tables.UTCDateTime)."""
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
