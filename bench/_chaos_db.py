"""The chaos run's state store (bench/chaos.py): made fresh, taken away for a few seconds, read.

Two backends, each with an outage that is real for it:

- PostgreSQL: a new database on the server named by the admin DSN, dropped at the end. Its outage
  is ``ALLOW_CONNECTIONS false`` with its sessions terminated: every read and write fails at once.
- SQLite: ``state.db`` in the run's state dir. Its outage is another process holding
  ``BEGIN EXCLUSIVE`` on the file: no one else can write until it lets go. Writers wait on the
  lock (the busy timeout, 30 s in sas/state_store/engine.py); an Agent gives up its row when its
  attempt has no time to spare and goes on without it. Reads go on (the file is in WAL mode, where
  an exclusive transaction keeps out writers only).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any, Protocol

from bench import _chaos_check as check

Rows = list[tuple[Any, ...]]
Mirror = tuple[dict[str, check.MirrorTask], dict[str, list[tuple[str, str]]]]

# The three reads of the mirror, one statement each; ``?`` is the task-id prefix (LIKE).
_TASKS = "SELECT task_id, state FROM tasks WHERE task_id LIKE ?"
_STEPS = "SELECT task_id, name, state, result FROM steps WHERE task_id LIKE ?"
_ALERTS = "SELECT task_id, status, kind FROM alerts WHERE task_id LIKE ?"

# Run as its own process, so the lock is held by a writer the stack does not know, as a stray
# `sqlite3` shell or a backup would hold it. It prints once it holds the lock, then lets go.
_LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=60)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
db.close()
"""


class ChaosStore(Protocol):
    """What the chaos run needs of its state store."""

    url: str
    """The SQLAlchemy URL every process of the stack is given (``SAS_DATABASE__URL``)."""

    def describe(self) -> str: ...

    async def create(self) -> None: ...

    async def outage(self, seconds: float) -> None:
        """Take the store away for ``seconds``, then give it back (also when cancelled)."""

    async def read_mirror(self, prefix: str) -> Mirror:
        """The tasks, steps and alerts of the task ids starting with ``prefix``."""

    async def drop(self) -> None: ...


def build_mirror(tasks: Rows, steps: Rows, alerts: Rows) -> Mirror:
    mirror = {t: check.MirrorTask(state=s, steps={}) for t, s in tasks}
    for task_id, name, state, result in steps:
        if task_id in mirror:  # a task accepted between the two reads waits for the next
            mirror[task_id].steps[name] = state
            if isinstance(result, str):  # JSON as text (SQLite, asyncpg without a codec)
                result = json.loads(result)
            if isinstance(result, dict):
                mirror[task_id].results[name] = result
    by_task: dict[str, list[tuple[str, str]]] = {}
    for task_id, status, kind in alerts:
        by_task.setdefault(task_id, []).append((status, kind))
    return mirror, by_task


class PostgresStore:
    def __init__(self, admin_dsn: str, name: str) -> None:
        self.admin_dsn = admin_dsn
        self.name = name
        self.dsn = admin_dsn.rsplit("/", 1)[0] + f"/{name}"
        self.url = self.dsn.replace("postgresql://", "postgresql+asyncpg://", 1)

    def describe(self) -> str:
        return f"postgres:{self.name}"

    async def _admin(self, sql: str, *args: Any) -> Any:
        import asyncpg

        conn = await asyncpg.connect(self.admin_dsn, timeout=10)
        try:
            return await conn.execute(sql, *args)
        finally:
            await conn.close()

    async def create(self) -> None:
        await self._admin(f'CREATE DATABASE "{self.name}"')

    async def outage(self, seconds: float) -> None:
        await self._admin(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        try:
            await self._admin(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                self.name,
            )
            await asyncio.sleep(seconds)
        finally:
            await self._admin(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    async def read_mirror(self, prefix: str) -> Mirror:
        import asyncpg

        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            rows = [
                [tuple(r) for r in await conn.fetch(sql.replace("?", "$1"), f"{prefix}%")]
                for sql in (_TASKS, _STEPS, _ALERTS)
            ]
        finally:
            await conn.close()
        return build_mirror(*rows)

    async def drop(self) -> None:
        await self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class SqliteStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"sqlite+aiosqlite:///{path}"

    def describe(self) -> str:
        return f"sqlite:{self.path}"

    async def create(self) -> None:
        """Nothing to do: ``sas migrate`` makes the file."""

    async def outage(self, seconds: float) -> None:
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _LOCK_HOLDER, str(self.path), f"{seconds:.3f}", stdout=asyncio.subprocess.PIPE
        )
        try:
            assert holder.stdout is not None
            # BEGIN EXCLUSIVE first waits for the writer holding the lock now, if any.
            line = await asyncio.wait_for(holder.stdout.readline(), timeout=70)
            if line.strip() != b"locked":
                raise RuntimeError(f"the lock holder did not take the lock (exit {await holder.wait()})")
            if await holder.wait() != 0:
                raise RuntimeError(f"the lock holder failed (exit {holder.returncode})")
        finally:
            if holder.returncode is None:
                holder.kill()  # its connection dies with it, and the lock with the connection
                await holder.wait()

    async def read_mirror(self, prefix: str) -> Mirror:
        return await asyncio.to_thread(self._read, f"{prefix}%")

    def _read(self, pattern: str) -> Mirror:
        db = sqlite3.connect(self.path, timeout=5, isolation_level=None)
        try:
            db.execute("BEGIN")  # one snapshot for the three reads
            rows = [db.execute(sql, (pattern,)).fetchall() for sql in (_TASKS, _STEPS, _ALERTS)]
            db.execute("ROLLBACK")
        finally:
            db.close()
        return build_mirror(*rows)

    async def drop(self) -> None:
        """Nothing to do: the file goes with the state dir."""
