"""The services' ledger holds every answer body, a charge's client secret among them: its file,
and SQLite's WAL and shared-memory files beside it, are readable by their owner only, whatever
the umask, and a ledger an older sas left readable by others is tightened when it is opened."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sas_demo_services.ledger import Ledger


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the usual login umask, under which files come out 0644
    try:
        yield
    finally:
        os.umask(previous)


def _modes(path: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in path.parent.iterdir() if p.name.startswith(path.name)}


async def test_a_new_ledger_and_its_wal_are_private(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "ledger.db"
    ledger = Ledger(str(path))
    try:
        await ledger.reset()  # a write, so the WAL and shared-memory files exist
        modes = _modes(path)
        assert {"ledger.db", "ledger.db-wal", "ledger.db-shm"} <= set(modes), modes
        assert all(mode == 0o600 for mode in modes.values()), {n: oct(m) for n, m in modes.items()}
    finally:
        ledger.close()


async def test_a_ledger_left_readable_is_tightened_when_opened(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "ledger.db"
    sqlite3.connect(path).close()
    path.chmod(0o644)
    ledger = Ledger(str(path))
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        ledger.close()
