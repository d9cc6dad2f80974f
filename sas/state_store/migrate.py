"""Bring the state store's schema to the latest migration (``sas migrate``).

Only this module creates a state store: the directory of a SQLite file (mode 0700) and the file
itself (0600: it holds customer data, and card numbers when encryption is off). Every other
command opens an existing one (``engine.py``). A database whose ``alembic_version`` table is
another application's is refused, never "upgraded" (``ForeignDatabase``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from sas.state_store.engine import sqlite_path

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same in every sas process.
_PG_LOCK_ID = int(hashlib.sha256(b"sas-migrate").hexdigest()[:15], 16)
# Tables the first migration creates: a database at one of sas's revisions has them.
_SAS_TABLES = ("tasks", "steps")


class ForeignDatabase(RuntimeError):
    """The database already holds another application's migrations. ``str()`` is the line to show."""


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str) -> None:
    """Migrate to head. Safe to call from several processes at once: they take turns."""
    from alembic import command

    path = sqlite_path(url)
    if path is not None:
        create_private(path)
        import fcntl  # POSIX; sas runs on Linux and macOS (sas/cli/main.py says so elsewhere)

        with open(os.open(f"{path}.migrate.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            asyncio.run(_refuse_foreign(url))
            command.upgrade(alembic_config(url), "head")
        return
    asyncio.run(_upgrade_postgres_locked(url))


def create_private(path: Path) -> None:
    """The SQLite file's directory (0700 when created here) and the file itself (0600), so that
    neither the data nor its WAL and shared-memory files (SQLite gives them the file's mode)
    are readable by other users. An existing file keeps its mode."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))


async def _upgrade_postgres_locked(url: str) -> None:
    from alembic import command
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _PG_LOCK_ID})
            try:
                await _check_not_foreign(conn, url)
                await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _PG_LOCK_ID})
    finally:
        await engine.dispose()


async def _refuse_foreign(url: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await _check_not_foreign(conn, url)
    finally:
        await engine.dispose()


async def _check_not_foreign(conn: AsyncConnection, url: str) -> None:
    """Raise ForeignDatabase if an ``alembic_version`` table names a revision that is not one of
    sas's, or names one of sas's while sas's tables are missing (another application's "0007"
    must not read as "up to date")."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import inspect, text

    def look(sync_conn: Connection) -> tuple[set[str], list[str]]:
        tables = set(inspect(sync_conn).get_table_names())
        if "alembic_version" not in tables:
            return tables, []
        rows = sync_conn.execute(text("SELECT version_num FROM alembic_version"))
        return tables, [str(r[0]) for r in rows]

    tables, versions = await conn.run_sync(look)
    if not versions:
        return
    known = {script.revision for script in ScriptDirectory.from_config(alembic_config(url)).walk_revisions()}
    foreign = [v for v in versions if v not in known]
    missing = [t for t in _SAS_TABLES if t not in tables]
    if foreign or missing:
        from sqlalchemy.engine import make_url

        why = (
            f"revision {foreign[0]!r} is not one of sas's migrations"
            if foreign
            else f"it names revision {versions[0]!r} but has no {missing[0]!r} table"
        )
        raise ForeignDatabase(
            f"the database at {make_url(url).render_as_string(hide_password=True)} has another application's alembic_version table ({why}):"
            " give sas a database of its own"
        )


async def upgrade_async(url: str) -> None:
    """``upgrade`` from async code (alembic's env runs its own event loop, so use a thread)."""
    await asyncio.to_thread(upgrade, url)
