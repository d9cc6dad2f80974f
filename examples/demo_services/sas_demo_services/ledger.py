"""The services' durable memory: the ledger of real effects, the idempotency store and
the tombstones of compensated keys, in one SQLite file (WAL, so other processes can
read it while the service writes).

Every operation runs as one ``BEGIN IMMEDIATE`` transaction on a single dedicated
thread: an effect, its stored response and any tombstone commit together or not at all.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from sas_demo_services.schemas import Action, Service

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL,
    action TEXT NOT NULL,
    order_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    target_key TEXT,
    amount_cents INTEGER,
    at TEXT NOT NULL,
    provider_id TEXT,
    target_id TEXT
);
CREATE INDEX IF NOT EXISTS ledger_order ON ledger (order_id, seq);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger (service, idempotency_key);
CREATE INDEX IF NOT EXISTS ledger_target ON ledger (service, target_key);
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS voids (
    service TEXT NOT NULL,
    key TEXT NOT NULL,
    by_key TEXT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (service, key)
);
"""

_COLUMNS = "seq, service, action, order_id, idempotency_key, target_key, amount_cents, at, provider_id, target_id"
# Ledgers written before the services issued their own ids get the columns on open.
_ADDED_COLUMNS = ("provider_id", "target_id")
_ID_INDEX = "CREATE INDEX IF NOT EXISTS ledger_provider_id ON ledger (service, provider_id)"


class LedgerEntry(BaseModel):
    """One real effect, as ``GET /ledger`` reports it.

    Attributes:
        seq: Position in the ledger; increases with every effect.
        service: The service that performed it.
        action: What was done.
        order_id: The order it belongs to.
        idempotency_key: The key of the request that caused it.
        target_key: For a compensation, the forward key it undid; otherwise None.
        amount_cents: Money moved (charge, refund); otherwise None.
        at: When it was committed (UTC).
        provider_id: The service's own id of this effect (``ch_…``, ``rsv_…``, ``shp_…``, ``re_…``).
        target_id: For a compensation, the service's id of the effect it undid.
    """

    model_config = ConfigDict(frozen=True)

    seq: int
    service: Service
    action: Action
    order_id: str
    idempotency_key: str
    target_key: str | None = None
    amount_cents: int | None = None
    at: datetime
    provider_id: str | None = None
    target_id: str | None = None


@dataclass(frozen=True)
class Effect:
    """An effect to record (``seq`` and ``at`` are assigned on commit)."""

    service: Service
    action: Action
    order_id: str
    idempotency_key: str
    target_key: str | None = None
    amount_cents: int | None = None
    provider_id: str | None = None
    target_id: str | None = None


@dataclass(frozen=True)
class StoredResponse:
    """The answer to a successful request, kept to replay it for the same key."""

    endpoint: str
    fingerprint: str
    status: int
    body: str


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _entry(row: tuple[object, ...]) -> LedgerEntry:
    return LedgerEntry.model_validate(dict(zip(_COLUMNS.split(", "), row, strict=True)))


def _select_entries(conn: sqlite3.Connection, order_id: str | None, idempotency_key: str | None) -> list[LedgerEntry]:
    clauses: list[str] = []
    params: list[str] = []
    if order_id is not None:
        clauses.append("order_id = ?")
        params.append(order_id)
    if idempotency_key is not None:
        clauses.append("idempotency_key = ?")
        params.append(idempotency_key)
    where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM ledger{where} ORDER BY seq", params).fetchall()
    return [_entry(row) for row in rows]


class LedgerTx:
    """What an operation may read and write, inside its one transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def stored_response(self, key: str) -> StoredResponse | None:
        """The stored success for ``key``, if a request with it succeeded before."""
        row = self._conn.execute(
            "SELECT endpoint, fingerprint, status, body FROM idempotency WHERE key = ?", (key,)
        ).fetchone()
        return None if row is None else StoredResponse(*row)

    def is_voided(self, service: str, key: str) -> bool:
        """Whether a compensation already named ``key`` of ``service``."""
        row = self._conn.execute("SELECT 1 FROM voids WHERE service = ? AND key = ?", (service, key)).fetchone()
        return row is not None

    def effect_in_force(self, service: str, action: str, key: str) -> LedgerEntry | None:
        """The forward effect done under ``key`` that no compensation has undone yet."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM ledger AS f WHERE service = ? AND action = ? AND idempotency_key = ?"
            " AND NOT EXISTS (SELECT 1 FROM ledger AS c WHERE c.service = f.service AND c.target_key = ?)"
            " ORDER BY seq LIMIT 1",
            (service, action, key, key),
        ).fetchone()
        return None if row is None else _entry(row)

    def effect_by_id(self, service: str, action: str, provider_id: str) -> LedgerEntry | None:
        """The forward effect the service knows by ``provider_id``, undone or not."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM ledger WHERE service = ? AND action = ? AND provider_id = ? ORDER BY seq LIMIT 1",
            (service, action, provider_id),
        ).fetchone()
        return None if row is None else _entry(row)

    def forward_by_key(self, service: str, action: str, key: str) -> LedgerEntry | None:
        """The forward effect done under our idempotency ``key``, undone or not."""
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM ledger WHERE service = ? AND action = ? AND idempotency_key = ?"
            " ORDER BY seq LIMIT 1",
            (service, action, key),
        ).fetchone()
        return None if row is None else _entry(row)

    def record_effect(self, effect: Effect) -> None:
        """Append an effect to the ledger."""
        self._conn.execute(
            "INSERT INTO ledger (service, action, order_id, idempotency_key, target_key, amount_cents, at,"
            " provider_id, target_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                effect.service,
                effect.action,
                effect.order_id,
                effect.idempotency_key,
                effect.target_key,
                effect.amount_cents,
                _now(),
                effect.provider_id,
                effect.target_id,
            ),
        )

    def void(self, service: str, key: str, by_key: str) -> None:
        """Tombstone ``key``: a later forward request with it must not take effect."""
        self._conn.execute(
            "INSERT OR IGNORE INTO voids (service, key, by_key, at) VALUES (?, ?, ?, ?)",
            (service, key, by_key, _now()),
        )

    def clear(self) -> None:
        """Delete every effect, stored response and tombstone."""
        for table in ("ledger", "idempotency", "voids"):
            self._conn.execute(f"DELETE FROM {table}")

    def store_response(self, key: str, response: StoredResponse) -> None:
        """Keep a success so a repeat of ``key`` replays it."""
        self._conn.execute(
            "INSERT INTO idempotency (key, endpoint, fingerprint, status, body, at) VALUES (?, ?, ?, ?, ?, ?)",
            (key, response.endpoint, response.fingerprint, response.status, response.body, _now()),
        )


def _make_private(path: str) -> None:
    """The ledger holds every answer body, a charge's client secret among them, so only its owner
    may read it: the file is created 0600 (SQLite gives its WAL and shared-memory files the same
    mode), and a file left readable by others, by an older sas, loses those bits now."""
    if path == ":memory:" or path.startswith("file:"):
        return
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    for part in (path, f"{path}-wal", f"{path}-shm"):
        try:
            mode = os.stat(part).st_mode
        except FileNotFoundError:
            continue
        if mode & 0o077:
            os.chmod(part, stat.S_IMODE(mode) & 0o700)


class Ledger:
    """The SQLite-backed store of one service process.

    Args:
        path: The SQLite file; created with its schema if missing.

    Raises:
        sqlite3.Error: If the file cannot be opened or is not a usable database.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        # One thread owns the connection: operations queue up instead of fighting over
        # SQLite's write lock, and the event loop never blocks on disk.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        _make_private(path)
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(_SCHEMA)
            present = {row[1] for row in self._conn.execute("PRAGMA table_info(ledger)")}
            for column in _ADDED_COLUMNS:
                if column not in present:
                    self._conn.execute(f"ALTER TABLE ledger ADD COLUMN {column} TEXT")
            self._conn.execute(_ID_INDEX)
        except sqlite3.Error:
            self._conn.close()
            raise

    def _transaction(self, operation: Callable[[LedgerTx], T]) -> T:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = operation(LedgerTx(self._conn))
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return result

    async def run(self, operation: Callable[[LedgerTx], T]) -> T:
        """Run ``operation`` in one transaction; an exception from it rolls everything back.

        Args:
            operation: Reads and writes through the given :class:`LedgerTx`.

        Returns:
            What ``operation`` returned.
        """
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._transaction, operation)

    async def lookup(self, service: str, action: str, key: str) -> LedgerEntry | None:
        """The forward effect of ``service`` done under our idempotency ``key``, if any."""
        return await self.run(lambda tx: tx.forward_by_key(service, action, key))

    async def entries(self, order_id: str | None = None, idempotency_key: str | None = None) -> list[LedgerEntry]:
        """The ledger in ``seq`` order, optionally filtered."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, _select_entries, self._conn, order_id, idempotency_key)

    async def reset(self) -> None:
        """Forget every effect, stored response and tombstone."""
        await self.run(LedgerTx.clear)

    def close(self) -> None:
        """Finish queued work and close the database."""
        self._executor.shutdown(wait=True)
        self._conn.close()


def read_ledger(path: str, order_id: str | None = None, idempotency_key: str | None = None) -> list[LedgerEntry]:
    """Read the ledger file directly, from any process, without going through HTTP.

    Args:
        path: The SQLite file the service writes.
        order_id: Only entries of this order.
        idempotency_key: Only entries caused by this key.

    Returns:
        The entries in ``seq`` order.

    Raises:
        FileNotFoundError: If there is no such file.
    """
    if not Path(path).exists():
        raise FileNotFoundError(path)
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    try:
        return _select_entries(conn, order_id, idempotency_key)
    finally:
        conn.close()
