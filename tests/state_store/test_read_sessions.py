"""A read-only session never waits for a writer (SQLite in WAL mode): an operator's `sas list`,
`sas show` or `sas services` answers while the stack writes. A write session still takes the
write lock up front (engine.py says why)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from sqlalchemy import text

from sas import state_store
from sas.settings import DatabaseSettings


async def test_a_read_session_reads_while_a_writer_holds_the_lock(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await state_store.upgrade_async(url)
    engine = state_store.create_engine(DatabaseSettings(url=url))
    async with engine.connect():  # the stack's processes open the file first: it is in WAL mode
        pass
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # the write lock, held until the end of the test
        writer.execute(
            "INSERT INTO audit_log (task_id, run_id, seq, action, actor, reason, changed, at)"
            " VALUES ('t', 'r', 1, 'retry', 'alice', 'why', '', '2026-01-01 00:00:00')"
        )
        async with state_store.session_factory(engine, read_only=True)() as session:
            # Within the deadline, while the lock is still held: a session that waited for the
            # lock would give up only after the 30 s busy timeout.
            rows = await asyncio.wait_for(session.execute(text("SELECT count(*) FROM audit_log")), timeout=20)
            assert rows.scalar_one() == 0  # its snapshot: the writer has not committed
        assert writer.in_transaction
        writer.execute("COMMIT")
        async with state_store.session_factory(engine, read_only=True)() as session:
            assert (await session.execute(text("SELECT count(*) FROM audit_log"))).scalar_one() == 1
    finally:
        writer.close()
        await engine.dispose()


async def test_a_write_session_still_takes_the_write_lock_first(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await state_store.upgrade_async(url)
    engine = state_store.create_engine(DatabaseSettings(url=url))
    try:
        async with state_store.session_factory(engine)() as session, session.begin():
            await session.execute(text("SELECT 1"))
            other = sqlite3.connect(tmp_path / "state.db", isolation_level=None, timeout=0)
            try:  # the write lock is ours already, though nothing was written yet
                other.execute("BEGIN IMMEDIATE")
                raise AssertionError("a second writer got the lock a write session holds")
            except sqlite3.OperationalError as err:
                assert "locked" in str(err)
            finally:
                other.close()
    finally:
        await engine.dispose()
