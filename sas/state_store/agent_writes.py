"""The hot-path writes, on the database driver directly: a task's acceptance (the task
row and its Pending step rows) and the Agents' own writes - Processing when an attempt
starts, Processed when it succeeds.

They are three-quarters of the mirror's work: eight writes per order. Through an ORM session
each cost about 4 ms of CPU and, on SQLite, contended with the Agents' connection for the
file's write lock; as plain statements on one kept-open connection, well under 1 ms
(bench/write_cost.py, docs/benchmarks.md). This module owns only the connections, the
batching and the transactions: the statements are the one writer's (``sas.state_store.mirror_rules``),
compiled once for the driver, so these writes follow the same rules as every other write of
``tasks`` and ``steps``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol, cast

from sqlalchemy import JSON
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.engine import make_url

from sas.settings import DatabaseSettings
from sas.state_store import mirror_rules as rules
from sas.state_store.engine import sqlite_path
from sas.state_store.mirror_rules import (
    judge_existing,
    new_step_params,
    new_task_params,
    starts_attempt,
    transition_params,
)
from sas.state_store.tables import UTCDateTime
from sas.task_models import AcceptOutcome, StepTransition, TaskAccepted

log = logging.getLogger("sas.state_store")


class StepWriter(Protocol):
    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        """Write the task row and its step rows (Pending) in one transaction, or say who owns the id."""
        ...

    async def write(self, t: StepTransition) -> None: ...

    def behind(self, write: Awaitable[None]) -> None:
        """Run a write its caller does not wait for; ``aclose`` waits for it first."""
        ...

    async def aclose(self) -> None: ...


class WritesBehind:
    """The writes nobody waits for (``StepWriter.behind``): kept referenced until they end, so
    that none is collected half done, and waited for, within ``_SETTLE_S``, when the writer
    closes, so that a worker stopping does not drop what it has already answered."""

    _SETTLE_S = 30.0

    def __init__(self) -> None:
        self._behind: set[asyncio.Future[None]] = set()

    def behind(self, write: Awaitable[None]) -> None:
        task = asyncio.ensure_future(write)
        self._behind.add(task)
        task.add_done_callback(self._behind.discard)

    async def _settle(self) -> None:
        if self._behind:
            await asyncio.wait(set(self._behind), timeout=self._SETTLE_S)


def make_step_writer(db: DatabaseSettings) -> StepWriter:
    path = sqlite_path(db.url)
    return SqliteStepWriter(str(path)) if path is not None else PostgresStepWriter(db)


# -- the one writer's statements, compiled for the hot path's drivers


class Compiled:
    """A statement compiled for one driver: its SQL, and its parameters in the order it binds them."""

    def __init__(self, statement: Any, backend: str) -> None:
        dialect = sqlite_dialect(paramstyle="qmark") if backend == "sqlite" else asyncpg_dialect()
        compiled = statement.compile(dialect=dialect)
        self.sql: str = compiled.string
        positions = tuple(compiled.positiontup or ())
        fixed = [name for name in positions if not name.startswith(rules.PARAM_PREFIX)]
        assert not fixed, f"a hot-path statement binds only named parameters, not {fixed}"
        names = [name.removeprefix(rules.PARAM_PREFIX) for name in positions]
        self.args: Callable[[Mapping[str, Any]], tuple[Any, ...]] = (
            itemgetter(*names) if len(names) > 1 else lambda params: (params[names[0]],)
        )
        # What a session's type processors would convert: JSON to text, and on SQLite datetimes.
        self.converted: dict[str, Callable[[Any], Any]] = {}
        for position, name in zip(positions, names, strict=True):
            kind = compiled.binds[position].type
            if isinstance(kind, JSON):
                self.converted[name] = _as_json
            elif backend == "sqlite" and isinstance(kind, UTCDateTime):
                self.converted[name] = _as_text

    def many(self, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        return [self.args(row) for row in rows]


class HotPath:
    """The statements the hot path runs, compiled for one backend (``sqlite`` or ``postgresql``)."""

    def __init__(self, backend: str) -> None:
        self.step = Compiled(rules.STEP_WRITE, backend)
        self.task = Compiled(rules.TASK_WRITE, backend)
        self.attempt = Compiled(rules.ATTEMPT_INSERT[backend], backend)
        self.new_task = Compiled(rules.TASK_INSERT[backend], backend)
        self.new_step = Compiled(rules.STEP_INSERT[backend], backend)
        self.existing = Compiled(rules.EXISTING, backend)
        self.adopt_task = Compiled(rules.ADOPT_TASK, backend)
        self.adopt_steps = Compiled(rules.ADOPT_STEPS, backend)
        # On PostgreSQL a transition is one statement (rules.TRANSITION_AS_ONE); SQLite batches
        # the separate statements in its writer thread's transaction instead.
        self.transition: dict[tuple[bool, bool], Compiled] = (
            {kind: Compiled(one, backend) for kind, one in rules.TRANSITION_AS_ONE.items()}
            if backend == "postgresql"
            else {}
        )
        statements = [v for v in vars(self).values() if isinstance(v, Compiled)] + list(self.transition.values())
        self._converted = tuple({k: f for c in statements for k, f in c.converted.items()}.items())

    def prepared(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` as the driver takes them, converted in place once for all the statements
        of a write: JSON as compact text, and on SQLite datetimes as the naive UTC text
        SQLAlchemy stores (``tables.UTCDateTime``). Which names need it is known from the
        statements' parameter types."""
        for name, convert in self._converted:
            value = params.get(name)
            if value is not None:
                params[name] = convert(value)
        return params


def _as_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _as_text(value: datetime) -> str:
    # SQLAlchemy's SQLite format, "%Y-%m-%d %H:%M:%S.%f", spelled the quicker way.
    offset = value.utcoffset()
    if offset is None:
        raise ValueError("naive datetime given to the state store; use an aware UTC datetime")
    return (value - offset).replace(tzinfo=None).isoformat(" ", "microseconds")


_SQLITE = HotPath("sqlite")
_PG = HotPath("postgresql")


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
        task = _SQLITE.new_task.args(_SQLITE.prepared(new_task_params(accepted, at)))
        steps = _SQLITE.new_step.many([_SQLITE.prepared(row) for row in new_step_params(accepted, at)])
        ids = {"task_id": accepted.task_id, "run_id": accepted.run_id, "chain_id": accepted.chain_id}

        def run(db: sqlite3.Connection) -> AcceptOutcome:
            if db.execute(_SQLITE.new_task.sql, task).rowcount:
                db.executemany(_SQLITE.new_step.sql, steps)
                return AcceptOutcome(status="new")
            chain_id, state, incarnation = db.execute(_SQLITE.existing.sql, _SQLITE.existing.args(ids)).fetchone()
            outcome = judge_existing(chain_id, state, incarnation, accepted)
            if outcome.status == "same_task":
                db.execute(_SQLITE.adopt_task.sql, _SQLITE.adopt_task.args(ids))
                db.execute(_SQLITE.adopt_steps.sql, _SQLITE.adopt_steps.args(ids))
            return outcome

        return cast(AcceptOutcome, await self._submit(run, durable=True))

    async def write(self, t: StepTransition) -> None:
        params = _SQLITE.prepared(transition_params(t))
        step = _SQLITE.step.args(params)
        task = _SQLITE.task.args(params) if t.task_state is not None else None
        attempt = _SQLITE.attempt.args(params) if starts_attempt(t) else None

        def run(db: sqlite3.Connection) -> None:
            applied = db.execute(_SQLITE.step.sql, step).rowcount
            if task is not None:
                db.execute(_SQLITE.task.sql, task)
            if attempt is not None and applied:
                db.execute(_SQLITE.attempt.sql, attempt)

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


# An accept's transaction waits for its WAL to be flushed, whatever the session's default. Both
# in one simple query: one round trip, as asyncpg's own BEGIN would be.
_DURABLE_BEGIN = "BEGIN; SET LOCAL synchronous_commit TO on"


async def _session_state_kept(_conn: Any) -> None:
    """The pool's reset of a released connection, beyond the rollback of an open transaction
    that asyncpg always does: nothing. Its default (advisory unlocks, CLOSE ALL, UNLISTEN,
    RESET ALL) is a round trip per write, for session state these connections never set."""


class PostgresStepWriter(WritesBehind):
    """A small asyncpg pool: PostgreSQL takes concurrent writers, so no batching is needed.

    The durability split of the SQLite writer, in PostgreSQL's terms: the pool's sessions commit
    with ``synchronous_commit=off``, so a step transition returns once it is in PostgreSQL's WAL
    buffers, without waiting for the WAL's flush to disk (the WAL writer flushes it within a few
    hundred milliseconds). A crash of the server can lose the last few transitions, never half
    of one; the Supervisor's reconciliation writes them back from Temporal. An accept sets
    ``synchronous_commit`` back on for its own transaction: it is on disk before it returns."""

    def __init__(self, db: DatabaseSettings) -> None:
        super().__init__()
        url = make_url(db.url)
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False).split("?")[0]
        self._ssl = url.query.get("ssl") or url.query.get("sslmode")
        self._size = db.pool_size
        self._pool: Any = None
        self._starting = asyncio.Lock()

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        pool = await self._get_pool()
        async with pool.acquire() as conn:
            await conn.execute(_DURABLE_BEGIN)
            try:
                outcome = await self._accept_in(conn, accepted)
            except BaseException:
                # The pool rolls back what is left open too, but calls that a leak and logs it.
                if not conn.is_closed():
                    with contextlib.suppress(Exception):
                        await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")
            return outcome

    async def _accept_in(self, conn: Any, accepted: TaskAccepted) -> AcceptOutcome:
        """The accept's statements, inside the transaction ``accept`` opened."""
        at = accepted.accepted_at
        ids = {"task_id": accepted.task_id, "run_id": accepted.run_id, "chain_id": accepted.chain_id}
        task = _PG.new_task.args(_PG.prepared(new_task_params(accepted, at)))
        if await conn.execute(_PG.new_task.sql, *task) != "INSERT 0 0":
            steps = _PG.new_step.many([_PG.prepared(row) for row in new_step_params(accepted, at)])
            await conn.executemany(_PG.new_step.sql, steps)
            return AcceptOutcome(status="new")
        row = await conn.fetchrow(_PG.existing.sql, *_PG.existing.args(ids))
        outcome = judge_existing(row["chain_id"], row["state"], row["incarnation"], accepted)
        if outcome.status == "same_task":
            await conn.execute(_PG.adopt_task.sql, *_PG.adopt_task.args(ids))
            await conn.execute(_PG.adopt_steps.sql, *_PG.adopt_steps.args(ids))
        return outcome

    async def write(self, t: StepTransition) -> None:
        params = _PG.prepared(transition_params(t))
        # The step, its task and its attempt, all or none: one statement (rules.TRANSITION_AS_ONE).
        statement = _PG.transition[(t.task_state is not None, starts_attempt(t))]
        pool = await self._get_pool()
        async with pool.acquire() as conn:
            await conn.execute(statement.sql, *statement.args(params))

    async def _get_pool(self) -> Any:
        import asyncpg

        async with self._starting:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._dsn,
                    min_size=1,
                    max_size=self._size,
                    ssl=self._ssl,
                    reset=_session_state_kept,
                    server_settings={"synchronous_commit": "off"},
                )
        return self._pool

    async def aclose(self) -> None:
        await self._settle()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
