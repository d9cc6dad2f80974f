"""Bring the state store's schema to the latest migration (``sas migrate``)."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from sas.state_store.engine import sqlite_path

_MIGRATIONS = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same in every sas process.
_PG_LOCK_ID = int(hashlib.sha256(b"sas-migrate").hexdigest()[:15], 16)


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str) -> None:
    """Migrate to head. Safe to call from several processes at once: they take turns."""
    path = sqlite_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{path}.migrate.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            command.upgrade(alembic_config(url), "head")
        return
    asyncio.run(_upgrade_postgres_locked(url))


async def _upgrade_postgres_locked(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:id)"), {"id": _PG_LOCK_ID})
            try:
                await asyncio.to_thread(command.upgrade, alembic_config(url), "head")
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:id)"), {"id": _PG_LOCK_ID})
    finally:
        await engine.dispose()


async def upgrade_async(url: str) -> None:
    """``upgrade`` from async code (alembic's env runs its own event loop, so use a thread)."""
    await asyncio.to_thread(upgrade, url)
