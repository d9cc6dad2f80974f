"""The Agents' writer on SQLite: group commit on one connection, applied where it costs least."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from sas.state_store.agent_writes.statements import SQLITE, accept_ids
from sas.state_store.agent_writes.writer import WritesBehind
from sas.state_store.mirror_rules import (
    judge_existing,
    new_step_params,
    new_task_params,
    starts_attempt,
    transition_params,
)
from sas.task_models import AcceptOutcome, StepTransition, TaskAccepted

log = logging.getLogger("sas.state_store")


# A write waiting for its batch: what it runs on the connection, its outcome, whether it syncs.
_Queued = tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any], bool]


class SqliteStepWriter(WritesBehind):
    """Group commit on one connection, applied where it costs least.

    SQLite serialises writers anyway, so concurrent writes are queued and applied
    together, in one transaction per batch. A small batch of step transitions on a free
    database is applied on the event loop itself: it only writes pages to the WAL (no
    sync), which costs less than handing it to a thread and back (bench/write_cost.py).
    Everything that may wait goes to the writer thread instead: a batch holding an accept
    (it syncs to disk), a large batch, a batch that finds the database's write lock held
    elsewhere (the thread waits for it; the event loop never does) and the WAL checkpoints.
    A write that fails for its own reasons fails alone: the batch is rolled back and applied
    again on the thread, with a savepoint per write. A failure of the database itself
    (locked for too long, I/O) fails the batch, and each Agent then retries its own write,
    which is safe because the writes are versioned.
    """

    _BATCH = 256
    # A larger batch goes to the thread: the hand-off is then shared by many writes, and the
    # event loop is never held for long (32 writes at once: about 2 ms of statements).
    _ON_LOOP_MAX = 32
    # Commits between two checkpoints of the WAL. The connection's own automatic checkpoint is
    # off, so that no commit on the event loop copies the WAL back and syncs the file: the
    # writer thread checkpoints instead, after about as many pages as SQLite's default of 1,000.
    _CHECKPOINT_EVERY = 128
    _BUSY_TIMEOUT_MS = 30000

    def __init__(self, path: str) -> None:
        super().__init__()
        self._path = path
        # Used by one batch at a time: on the event loop or on the writer thread, never both.
        self._db: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sas-step-writer")
        self._queue: list[_Queued] = []
        self._settings: tuple[str, int] | None = None  # the connection's (synchronous, busy timeout)
        self._commits = 0  # since the last checkpoint
        self._flusher: asyncio.Task[None] | None = None

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        at = accepted.accepted_at
        task = SQLITE.new_task.args(SQLITE.prepared(new_task_params(accepted, at)))
        steps = SQLITE.new_step.many([SQLITE.prepared(row) for row in new_step_params(accepted, at)])
        ids = accept_ids(accepted)

        def run(db: sqlite3.Connection) -> AcceptOutcome:
            if db.execute(SQLITE.new_task.sql, task).rowcount:
                db.executemany(SQLITE.new_step.sql, steps)
                return AcceptOutcome(status="new")
            chain_id, state, incarnation = db.execute(SQLITE.existing.sql, SQLITE.existing.args(ids)).fetchone()
            outcome = judge_existing(chain_id, state, incarnation, accepted)
            if outcome.status == "same_task":
                db.execute(SQLITE.adopt_task.sql, SQLITE.adopt_task.args(ids))
                db.execute(SQLITE.adopt_steps.sql, SQLITE.adopt_steps.args(ids))
            return outcome

        return cast(AcceptOutcome, await self._submit(run, durable=True))

    async def write(self, t: StepTransition) -> None:
        params = SQLITE.prepared(transition_params(t))
        step = SQLITE.step.args(params)
        task = SQLITE.task.args(params) if t.task_state is not None else None
        attempt = SQLITE.attempt.args(params) if starts_attempt(t) else None

        def run(db: sqlite3.Connection) -> None:
            applied = db.execute(SQLITE.step.sql, step).rowcount
            if task is not None:
                db.execute(SQLITE.task.sql, task)
            if attempt is not None and applied:
                db.execute(SQLITE.attempt.sql, attempt)

        await self._submit(run)

    async def _submit(self, run: Callable[[sqlite3.Connection], Any], durable: bool = False) -> Any:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((run, done, durable))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await done

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            batch, self._queue = self._queue[: self._BATCH], self._queue[self._BATCH :]
            runs = [run for run, _, _ in batch]
            durable = any(d for _, _, d in batch)
            try:
                outcomes = None
                if self._db is not None and not durable and len(runs) <= self._ON_LOOP_MAX:
                    outcomes = self._apply_on_loop(runs)
                if outcomes is None:
                    outcomes = await loop.run_in_executor(self._thread, self._apply, runs, durable)
            except Exception as err:  # noqa: BLE001 - handed to every write in the batch
                outcomes = [(False, err)] * len(batch)
            except BaseException:
                self._cancel_waiting(batch)
                raise
            for (_, done, _), (ok, value) in zip(batch, outcomes, strict=False):
                if done.done():  # its Agent was cancelled meanwhile
                    continue
                if ok:
                    done.set_result(value)
                else:
                    done.set_exception(value)
            if self._commits >= self._CHECKPOINT_EVERY:
                self._commits = 0
                try:
                    await loop.run_in_executor(self._thread, self._checkpoint)
                except BaseException:
                    self._cancel_waiting([])
                    raise

    def _cancel_waiting(self, batch: list[_Queued]) -> None:
        """Cancelled (the worker is shutting down): no one will flush what is waiting, so its
        writers must not wait for ever either."""
        for _, done, _ in batch + self._queue:
            done.cancel()
        self._queue = []

    def _apply_on_loop(self, runs: list[Callable[[sqlite3.Connection], Any]]) -> list[tuple[bool, Any]] | None:
        """On the event loop: the batch in one transaction, committed with ``synchronous=NORMAL``,
        without ever waiting. None when the thread must apply it instead: the write lock is held
        by another connection (this one does not wait for it here), or a write failed for its own
        reasons (the batch was rolled back; the thread applies it again, each write alone)."""
        db = self._db
        assert db is not None
        try:
            self._configure(db, "NORMAL", busy_timeout_ms=0)
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            # The primary code: an extended one (another connection recovering the WAL, say)
            # is a busy database all the same, for the thread to wait out.
            if err.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                return None
            self._close()
            raise
        try:
            return self._transaction(db, runs, alone=False, begun=True)
        except BaseException:
            self._close()
            raise

    def _apply(self, runs: list[Callable[[sqlite3.Connection], Any]], durable: bool) -> list[tuple[bool, Any]]:
        """On the writer thread: one transaction for the whole batch, waiting for the write lock.

        A batch holding an accept commits with ``synchronous=FULL``: the WAL is on disk before
        any accept of it returns, so an accepted task survives power loss (and so does every
        commit before it, which the same sync carries). A batch of step transitions only
        commits with ``NORMAL``: in WAL mode the database stays consistent, and a power loss
        can undo the last transitions, which Temporal still holds and reconciliation writes
        back (docs/reliability.md). That saves an fsync per batch on the hot path.
        """
        if self._db is None:
            db = sqlite3.connect(self._path, isolation_level=None, timeout=30, check_same_thread=False)
            # Wait for a lock, even here; the WAL is checkpointed by _checkpoint, not by a commit.
            for pragma in (f"busy_timeout={self._BUSY_TIMEOUT_MS}", "journal_mode=WAL", "wal_autocheckpoint=0"):
                db.execute(f"PRAGMA {pragma}")
            self._db, self._settings = db, None
        db = self._db
        try:
            self._configure(db, "FULL" if durable else "NORMAL", busy_timeout_ms=self._BUSY_TIMEOUT_MS)
            outcomes = self._transaction(db, runs, alone=False)
            if outcomes is None:
                # A write failed for its own reasons, and the batch was rolled back: applied
                # again, each write under a savepoint of its own, it fails alone. (A savepoint
                # per write every time was a tenth of the writer's CPU, for a rare failure.)
                outcomes = self._transaction(db, runs, alone=True)
        except BaseException:
            self._close()
            raise
        assert outcomes is not None
        return outcomes

    def _configure(self, db: sqlite3.Connection, synchronous: str, busy_timeout_ms: int) -> None:
        if self._settings != (synchronous, busy_timeout_ms):
            db.execute(f"PRAGMA synchronous={synchronous}")
            db.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            self._settings = (synchronous, busy_timeout_ms)

    def _checkpoint(self) -> None:
        """On the writer thread: copy the WAL's committed pages back into the database file, as
        far as readers allow (PASSIVE: it waits for no one). A checkpoint that fails is no write
        lost; the next one copies those pages too."""
        if self._db is None:
            return
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as err:
            log.warning("state store: WAL checkpoint failed, retried after the next writes: %s", err)

    def _transaction(
        self, db: sqlite3.Connection, runs: list[Callable[[sqlite3.Connection], Any]], alone: bool, begun: bool = False
    ) -> list[tuple[bool, Any]] | None:
        """Apply ``runs`` in one transaction and commit it. ``alone``: each under its own savepoint,
        a write's own failure rolled back to it and reported as its outcome; otherwise such a failure
        rolls the whole transaction back and returns None. A failure of the database raises.
        ``begun``: the caller has begun the transaction."""
        outcomes: list[tuple[bool, Any]] = []
        if not begun:
            db.execute("BEGIN IMMEDIATE")
        for run in runs:
            if alone:
                db.execute("SAVEPOINT w")
            try:
                outcomes.append((True, run(db)))
            except sqlite3.OperationalError:
                raise  # the database, not this write: fail the batch
            except Exception as err:  # noqa: BLE001 - this write's own failure
                if not alone:
                    db.execute("ROLLBACK")
                    return None
                db.execute("ROLLBACK TO w")
                outcomes.append((False, err))
            if alone:
                db.execute("RELEASE w")
        db.execute("COMMIT")
        self._commits += 1
        return outcomes

    def _close(self) -> None:
        # After a failure the connection's state is unknown: start again with a new one.
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    async def aclose(self) -> None:
        await self._settle()
        if self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher], timeout=30)
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        # A writer can still be used after closing; its next batch starts a new thread and connection.
        thread, self._thread = self._thread, ThreadPoolExecutor(1, thread_name_prefix="sas-step-writer")
        thread.shutdown(wait=False)
