"""The chaos run's SQLite outage (bench/_chaos_db.py) is real: while it lasts no other connection
can write the file, a writer fails "database is locked" once its busy timeout runs out, reads go
on, and writes land again afterwards. The full chaos run on SQLite takes over a minute, so CI
checks the outage here and leaves the run itself to `bench/chaos.py --database sqlite`."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest

from bench._chaos_db import SqliteStore


def _store(tmp_path: Path) -> SqliteStore:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")  # as `sas migrate` leaves it (sas/state_store/engine.py)
    db.execute("CREATE TABLE tasks (task_id TEXT PRIMARY KEY, state TEXT)")
    db.execute("CREATE TABLE steps (task_id TEXT, name TEXT, state TEXT, result TEXT)")
    db.execute("CREATE TABLE alerts (task_id TEXT, status TEXT, kind TEXT)")
    db.execute("INSERT INTO tasks VALUES ('chaos-x-0001', 'Error'), ('other-0001', 'Processed')")
    db.execute(
        "INSERT INTO steps VALUES ('chaos-x-0001', 'reserve', 'Processed', '{\"reservation_id\": \"r1\"}'),"
        " ('chaos-x-0001', 'charge', 'Error', NULL)"
    )
    db.execute("INSERT INTO alerts VALUES ('chaos-x-0001', 'open', 'parked')")
    db.close()
    return SqliteStore(path)


def _write(path: Path, busy_timeout_s: float, commit: bool = True) -> None:
    """One write as the stack's writers make it: BEGIN IMMEDIATE (sas/state_store/engine.py)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_s)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE tasks SET state = 'Compensated' WHERE task_id = 'chaos-x-0001'")
        db.execute("COMMIT" if commit else "ROLLBACK")
    finally:
        db.close()


@pytest.mark.timeout(60)
async def test_the_sqlite_outage_refuses_writes_keeps_reads_and_ends(tmp_path: Path) -> None:
    store = _store(tmp_path)
    outage = asyncio.create_task(store.outage(2.0))
    deadline = time.monotonic() + 20
    while True:  # until the holder has the lock: then a writer with a short busy timeout is refused
        try:
            await asyncio.to_thread(_write, store.path, 0.05, False)
        except sqlite3.OperationalError as err:
            assert "database is locked" in str(err)
            break
        assert time.monotonic() < deadline, "the lock was never taken"
        await asyncio.sleep(0.05)
    mirror, alerts = await store.read_mirror("chaos-x-")  # reads go on meanwhile (WAL)
    assert mirror["chaos-x-0001"].state == "Error"
    assert mirror["chaos-x-0001"].steps == {"reserve": "Processed", "charge": "Error"}
    assert mirror["chaos-x-0001"].results == {"reserve": {"reservation_id": "r1"}}  # JSON read back
    assert set(mirror) == {"chaos-x-0001"} and alerts == {"chaos-x-0001": [("open", "parked")]}
    assert not outage.done()
    await outage
    await asyncio.to_thread(_write, store.path, 1.0)  # the lock is gone with the holder
    mirror, _ = await store.read_mirror("chaos-x-")
    assert mirror["chaos-x-0001"].state == "Compensated"
