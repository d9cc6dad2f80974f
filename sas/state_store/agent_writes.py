"""The hot-path writes, on the database driver directly: a task's acceptance (the task
row and its Pending step rows) and the Agents' own writes - Processing when an attempt
starts, Processed when it succeeds.

They are three-quarters of the mirror's work: eight writes per order. Through an ORM session
each cost about 4 ms of CPU and, on SQLite, contended with the Agents' connection for the
file's write lock; as plain statements on one kept-open connection, well under 1 ms
(bench/write_cost.py, docs/benchmarks.md). They follow the same rules as
``state_store.mirror.record_transitions``: a write applies only if its version is newer,
FailureCount never goes down, a success clears the last error, and accepting a task
twice changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from sqlalchemy.engine import make_url

from sas.settings import DatabaseSettings
from sas.state_store.engine import sqlite_path
from sas.state_store.tables import shard_of
from sas.task_models import AcceptOutcome, StepState, StepTransition, TaskAccepted, TaskState

# Only a step that went through clears its last error. An undone step keeps it: after a
# compensation, "what failed?" is the question an operator asks (issue 14).
_CLEARS_ERROR = (StepState.PROCESSED,)


class StepWriter(Protocol):
    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        """Write the task row and its step rows (Pending) in one transaction, or say who owns the id."""
        ...

    async def write(self, t: StepTransition) -> None: ...

    async def aclose(self) -> None: ...


def make_step_writer(db: DatabaseSettings) -> StepWriter:
    path = sqlite_path(db.url)
    return SqliteStepWriter(str(path)) if path is not None else PostgresStepWriter(db)


# -- the statements, one set per backend; the parameters are built by the functions below them
#
# A write applies only to a row of its own chain of runs (see tables.Task.chain_id); rows
# accepted before chains were recorded (chain_id NULL) take any.

_SQLITE_STEP = (
    "UPDATE steps SET state=?, version=?, updated_at=?, locked_by=?, complete_by=?, attempt=COALESCE(?, attempt),"
    " failure_count=MAX(failure_count, COALESCE(?, failure_count)),"
    " last_error=CASE WHEN ? THEN NULL ELSE last_error END, error_type=CASE WHEN ? THEN NULL ELSE error_type END,"
    " run_id=COALESCE(?, run_id), result=COALESCE(?, result)"
    " WHERE task_id=? AND name=? AND version<? AND (chain_id IS NULL OR chain_id=?)"
)
_SQLITE_TASK = (
    "UPDATE tasks SET state=?, current_step=?, version=?, updated_at=?, run_id=COALESCE(?, run_id)"
    " WHERE task_id=? AND version<? AND (chain_id IS NULL OR chain_id=?)"
)
# An attempt's start (the Agent's write with LockedBy) is also kept as a row of its own, in
# the same transaction and only if the step write applied (so only for the task's own chain).
_ATTEMPT_COLUMNS = (
    "task_id, step, state, attempt, failure_count, locked_by, complete_by, started_at, version, chain_id, run_id"
)
_SQLITE_ATTEMPT = (
    f"INSERT INTO step_attempts ({_ATTEMPT_COLUMNS}) VALUES ({', '.join('?' * 11)}) ON CONFLICT DO NOTHING"
)
_TASK_COLUMNS = (
    "task_id, task_type, workflow_type, task_queue, state, current_step, payload, shard, version, created_at,"
    " updated_at, chain_id, run_id, incarnation"
)
_STEP_COLUMNS = (
    "task_id, name, position, agent, compensation, state, locked_by, complete_by, failure_count, resets, attempt,"
    " last_error, error_type, permanent, idempotency_key, complete_by_s, version, updated_at, shard, chain_id, run_id"
)
_SQLITE_NEW_TASK = f"INSERT INTO tasks ({_TASK_COLUMNS}) VALUES ({', '.join('?' * 14)}) ON CONFLICT DO NOTHING"
_SQLITE_NEW_STEP = f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES ({', '.join('?' * 21)}) ON CONFLICT DO NOTHING"
# On PostgreSQL each write and each accept is one statement, so that a batch of them is one
# pipelined round trip and one commit (PostgresStepWriter). A write: the step's UPDATE, the task's
# UPDATE if it carries a task state ($14), and the attempt's row if it starts one ($15) and the step
# UPDATE applied - the same three statements, and rules, as on SQLite.
_PG_WRITE = (
    "WITH step AS ("
    "UPDATE steps SET state=$1, version=$2, updated_at=$3, locked_by=$4, complete_by=$5,"
    " attempt=COALESCE($6, attempt), failure_count=GREATEST(failure_count, COALESCE($7, failure_count)),"
    " last_error=CASE WHEN $8 THEN NULL ELSE last_error END, error_type=CASE WHEN $8 THEN NULL ELSE error_type END,"
    " run_id=COALESCE($11, run_id), result=COALESCE($13, result)"
    " WHERE task_id=$9 AND name=$10 AND version<$2 AND (chain_id IS NULL OR chain_id=$12) RETURNING 1"
    "), task AS ("
    "UPDATE tasks SET state=$14, current_step=$10, version=$2, updated_at=$3, run_id=COALESCE($11, run_id)"
    " WHERE $14::varchar IS NOT NULL AND task_id=$9 AND version<$2 AND (chain_id IS NULL OR chain_id=$12)"
    f") INSERT INTO step_attempts ({_ATTEMPT_COLUMNS})"
    " SELECT $9, $10, $1, $6, COALESCE($7, 0), $4, $5, $3, $2, $12, $11"
    " WHERE $15 AND EXISTS (SELECT 1 FROM step) ON CONFLICT DO NOTHING"
)
# An accept: the task row, and its step rows only if the task row is new; says whether it was.
# The step rows' own columns come as arrays ($15-$20), the rest are the task's or a new row's.
_PG_ACCEPT = (
    f"WITH task AS (INSERT INTO tasks ({_TASK_COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, 15))})"
    " ON CONFLICT DO NOTHING RETURNING 1"
    f"), step AS (INSERT INTO steps ({_STEP_COLUMNS})"
    " SELECT $1, s.name, s.position, s.agent, s.compensation, $5, NULL, NULL, 0, 0, 0, NULL, NULL, false,"
    " s.key, s.complete_by_s, 0, $10, $8, $12, $13"
    " FROM unnest($15::varchar[], $16::int[], $17::varchar[], $18::varchar[], $19::varchar[], $20::float8[])"
    " AS s(name, position, agent, compensation, key, complete_by_s)"
    " WHERE EXISTS (SELECT 1 FROM task) ON CONFLICT DO NOTHING"
    ") SELECT EXISTS (SELECT 1 FROM task) AS new"
)
_SQLITE_EXISTING = "SELECT chain_id, state, incarnation FROM tasks WHERE task_id=?"
_PG_EXISTING = "SELECT chain_id, state, incarnation FROM tasks WHERE task_id=$1"
# A run of the task's own chain (a reset to before the accept, a retried accept) takes the rows over.
_SQLITE_ADOPT = (
    "UPDATE tasks SET run_id=?, chain_id=COALESCE(chain_id, ?) WHERE task_id=?",
    "UPDATE steps SET chain_id=COALESCE(chain_id, ?) WHERE task_id=?",
)
_PG_ADOPT = (
    "UPDATE tasks SET run_id=$1, chain_id=COALESCE(chain_id, $2) WHERE task_id=$3",
    "UPDATE steps SET chain_id=COALESCE(chain_id, $1) WHERE task_id=$2",
)
# States in which a task can no longer be adopted by a run that cannot prove it is of the same chain.
_FINISHED = (str(TaskState.PROCESSED), str(TaskState.COMPENSATED), str(TaskState.ERROR))


def judge_existing(chain_id: str | None, state: str, incarnation: int, accepted: TaskAccepted) -> AcceptOutcome:
    """Whether the run accepting ``accepted`` owns the task row already there.

    The same chain of runs (a reset or a retried accept) does. A row from before chains were
    recorded is adopted only while its task is unfinished; a finished one is never re-run."""
    same = chain_id == accepted.chain_id if chain_id is not None else state not in _FINISHED
    if same:
        return AcceptOutcome(status="same_task", state=state, incarnation=incarnation)
    return AcceptOutcome(status="other_task", state=state, incarnation=incarnation)


def _new_task_row(a: TaskAccepted, at: Any) -> tuple[Any, ...]:
    return (
        a.task_id, a.task_type, a.workflow_type, a.task_queue, str(TaskState.PENDING), None, json.dumps(a.payload),
        shard_of(a.task_id), 0, at, at, a.chain_id, a.run_id, 1,
    )  # fmt: skip


def _pg_accept_params(a: TaskAccepted) -> tuple[Any, ...]:
    """``_PG_ACCEPT``'s parameters: the task row, then one array per varying column of the step rows."""
    return (
        *_new_task_row(a, a.accepted_at.astimezone(UTC)),
        [p.name for p in a.steps],
        [p.position for p in a.steps],
        [p.agent for p in a.steps],
        [p.compensation for p in a.steps],
        [p.idempotency_key for p in a.steps],
        [p.resolved_policy.complete_by_s for p in a.steps],
    )


def _pg_write_params(t: StepTransition) -> tuple[Any, ...]:
    """``_PG_WRITE``'s parameters."""
    starts_attempt = t.locked_by is not None and t.attempt is not None
    return (
        str(t.state), t.version, t.at, t.locked_by, t.complete_by, t.attempt, t.failure_count,
        t.state in _CLEARS_ERROR, t.task_id, t.step, t.run_id, t.chain_id, _json(t.result),
        None if t.task_state is None else str(t.task_state), starts_attempt,
    )  # fmt: skip


def _new_step_rows(a: TaskAccepted, at: Any) -> list[tuple[Any, ...]]:
    shard = shard_of(a.task_id)
    return [
        (
            a.task_id,
            p.name,
            p.position,
            p.agent,
            p.compensation,
            str(StepState.PENDING),
            None,
            None,
            0,
            0,
            0,
            None,
            None,
            False,
            p.idempotency_key,
            p.resolved_policy.complete_by_s,
            0,
            at,
            shard,
            a.chain_id,
            a.run_id,
        )
        for p in a.steps
    ]


class SqliteStepWriter:
    """Group commit: the writes that arrive while a batch is being committed go into the next.

    SQLite serialises writers anyway, so concurrent writes are queued and applied
    together, in one transaction per batch - instead of an event-loop/thread round trip
    per statement. Each write runs under its own savepoint, so a write that fails for
    its own reasons fails alone; a failure of the database itself (locked, I/O) fails
    the batch, and each Agent then retries its own write, which is safe because the
    writes are versioned.

    Where a batch is committed:

    - A batch holding an accept, on the writer thread (its own connection, ``_apply``): it
      is synced to disk, and an fsync must not hold up the event loop.
    - A batch of step transitions only, on the event loop itself (a second connection,
      ``_apply_here``) when the write lock is free at that moment; otherwise on the writer
      thread, which waits for the lock. Such a commit (WAL, ``synchronous=NORMAL``, no
      checkpoint: the writer thread makes those) appends a few pages to the WAL and takes
      about as long as the hand-over to a thread would. At a busy worker's pace a batch holds
      a write or two, so the thread was woken for almost every write, and a thread woken from
      sleep cost about three times what the same statements cost on the event loop, which is
      always running (docs/benchmarks.md, section 1).
    """

    _BATCH = 256
    # Commits made on the event loop between two checkpoints, made on the writer thread (the
    # event loop's connection never checkpoints: a checkpoint copies pages back and syncs).
    _CHECKPOINT_EVERY = 200

    def __init__(self, path: str) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None  # used only on the writer thread
        self._here: sqlite3.Connection | None = None  # used only on the event loop's thread
        self._here_ok = True  # False: the file is not in WAL mode, so every batch goes to the thread
        self._here_commits = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sas-step-writer")
        self._queue: list[tuple[Callable[[sqlite3.Connection], Any], asyncio.Future[Any], bool]] = []
        self._synchronous = ""  # the connection's current PRAGMA synchronous, on the writer thread
        self._flusher: asyncio.Task[None] | None = None

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        at = _naive(accepted.accepted_at)
        task, steps = _new_task_row(accepted, at), _new_step_rows(accepted, at)

        def run(db: sqlite3.Connection) -> AcceptOutcome:
            if db.execute(_SQLITE_NEW_TASK, task).rowcount:
                db.executemany(_SQLITE_NEW_STEP, steps)
                return AcceptOutcome(status="new")
            chain_id, state, incarnation = db.execute(_SQLITE_EXISTING, (accepted.task_id,)).fetchone()
            outcome = judge_existing(chain_id, state, incarnation, accepted)
            if outcome.status == "same_task":
                db.execute(_SQLITE_ADOPT[0], (accepted.run_id, accepted.chain_id, accepted.task_id))
                db.execute(_SQLITE_ADOPT[1], (accepted.chain_id, accepted.task_id))
            return outcome

        return cast(AcceptOutcome, await self._submit(run, durable=True))

    async def write(self, t: StepTransition) -> None:
        ok = t.state in _CLEARS_ERROR
        at = _naive(t.at)
        step = (
            str(t.state),
            t.version,
            at,
            t.locked_by,
            _naive(t.complete_by),
            t.attempt,
            t.failure_count,
            ok,
            ok,
            t.run_id,
            _json(t.result),
            t.task_id,
            t.step,
            t.version,
            t.chain_id,
        )
        task = None
        if t.task_state is not None:
            task = (str(t.task_state), t.step, t.version, at, t.run_id, t.task_id, t.version, t.chain_id)
        attempt = _attempt_row(t, at, _naive(t.complete_by))

        def run(db: sqlite3.Connection) -> None:
            applied = db.execute(_SQLITE_STEP, step).rowcount
            if task is not None:
                db.execute(_SQLITE_TASK, task)
            if attempt is not None and applied:
                db.execute(_SQLITE_ATTEMPT, attempt)

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
            try:
                runs = [run for run, _, _ in batch]
                durable = any(d for _, _, d in batch)
                outcomes = None if durable else self._apply_here(runs)
                if outcomes is None:
                    outcomes = await loop.run_in_executor(self._thread, self._apply, runs, durable)
            except Exception as err:  # noqa: BLE001 - handed to every write in the batch
                outcomes = [(False, err)] * len(batch)
            except BaseException:
                # Cancelled (the worker is shutting down): no one will flush what is waiting,
                # so its writers must not wait for ever either.
                for _, done, _ in batch + self._queue:
                    done.cancel()
                self._queue = []
                raise
            for (_, done, _), (ok, value) in zip(batch, outcomes, strict=False):
                if done.done():  # its Agent was cancelled meanwhile
                    continue
                if ok:
                    done.set_result(value)
                else:
                    done.set_exception(value)

    def _apply(self, runs: list[Callable[[sqlite3.Connection], Any]], durable: bool) -> list[tuple[bool, Any]]:
        """On the writer thread: one transaction for the whole batch, a savepoint per write.

        A batch holding an accept commits with ``synchronous=FULL``: the WAL is on disk before
        any accept of it returns, so an accepted task survives power loss (and so does every
        commit before it, which the same sync carries). A batch of step transitions only
        commits with ``NORMAL``: in WAL mode the database stays consistent, and a power loss
        can undo the last transitions, which Temporal still holds and reconciliation writes
        back (docs/reliability.md). That saves an fsync per batch on the hot path.
        """
        db = self._connection()
        synchronous = "FULL" if durable else "NORMAL"
        if synchronous != self._synchronous:
            db.execute(f"PRAGMA synchronous={synchronous}")
            self._synchronous = synchronous
        try:
            db.execute("BEGIN IMMEDIATE")
            outcomes = _each_alone(db, runs)
            db.execute("COMMIT")
        except BaseException:
            self._close()
            raise
        return outcomes

    def _connection(self) -> sqlite3.Connection:
        """The writer thread's connection (on the writer thread)."""
        if self._db is None:
            self._db = sqlite3.connect(self._path, isolation_level=None, timeout=30)
            for pragma in ("busy_timeout=30000", "journal_mode=WAL"):  # wait for a lock, even here
                self._db.execute(f"PRAGMA {pragma}")
            self._synchronous = ""
        return self._db

    def _checkpoint(self) -> None:
        """On the writer thread: copy what the WAL holds back into the database file, as far as
        no reader needs it (PASSIVE: waits for no one), so the WAL does not grow without end."""
        try:
            self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            self._close()  # the next batch or checkpoint starts again with a new connection

    def _apply_here(self, runs: list[Callable[[sqlite3.Connection], Any]]) -> list[tuple[bool, Any]] | None:
        """On the event loop: a batch of step transitions in one transaction, if the write lock
        is free now; None if it is not (or the file is not in WAL mode), for the writer thread."""
        db = self._here_connection()
        if db is None:
            return None
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # another writer has the lock: the thread waits for it
            return None
        try:
            outcomes = _each_alone(db, runs)
            db.execute("COMMIT")
        except BaseException:
            self._close_here()  # rolls the transaction back; the next batch opens a new one
            raise
        self._here_commits += 1
        if self._here_commits % self._CHECKPOINT_EVERY == 0:
            self._thread.submit(self._checkpoint)
        return outcomes

    def _here_connection(self) -> sqlite3.Connection | None:
        if self._here is None and self._here_ok:
            try:
                # Never waits for a lock (timeout 0), never checkpoints, never syncs on commit.
                db = sqlite3.connect(self._path, isolation_level=None, timeout=0, check_same_thread=False)
                if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._here_ok = False  # without WAL a commit syncs: not on the event loop
                    db.close()
                    return None
                for pragma in ("busy_timeout=0", "synchronous=NORMAL", "wal_autocheckpoint=0"):
                    db.execute(f"PRAGMA {pragma}")
            except sqlite3.OperationalError:  # locked right now: the thread takes this batch
                return None
            self._here = db
        return self._here

    def _close_here(self) -> None:
        db, self._here = self._here, None
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    def _close(self) -> None:
        # After a failure the connection's state is unknown: start again with a new one.
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:  # noqa: BLE001 - it is being thrown away
                pass

    async def aclose(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher], timeout=30)
        self._close_here()
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        # A writer can still be used after closing; its next batch starts a new thread and connection.
        thread, self._thread = self._thread, ThreadPoolExecutor(1, thread_name_prefix="sas-step-writer")
        thread.shutdown(wait=False)


def _each_alone(db: sqlite3.Connection, runs: list[Callable[[sqlite3.Connection], Any]]) -> list[tuple[bool, Any]]:
    """Inside a batch's transaction: each write under its own savepoint, so one that fails for its
    own reasons fails alone; a failure of the database itself raises, failing the batch."""
    outcomes: list[tuple[bool, Any]] = []
    for run in runs:
        db.execute("SAVEPOINT w")
        try:
            outcomes.append((True, run(db)))
        except sqlite3.OperationalError:
            raise  # the database, not this write: fail the batch
        except Exception as err:  # noqa: BLE001 - this write's own failure
            db.execute("ROLLBACK TO w")
            outcomes.append((False, err))
        db.execute("RELEASE w")
    return outcomes


class PostgresStepWriter:
    """Group commit on PostgreSQL, as on SQLite: the writes and accepts that arrive while a batch
    is being sent go into the next batch.

    Each write and each accept is one statement (``_PG_WRITE``, ``_PG_ACCEPT``), so a batch of
    them is one pipelined round trip (asyncpg's ``executemany``/``fetchmany``) and one commit on
    one connection, instead of a connection, a transaction and three to five round trips per
    write. That is less CPU in the worker and far less in the server's backends, which share the
    machine's cores with everything else. Each batch is atomic, so a batch that fails is sent
    again one statement at a time: a write that fails for its own reasons (a value the database
    refuses) fails alone, the others land; a failure of the database itself fails each of them,
    and every Agent retries its own write, which is safe because the writes are versioned.
    Commits are PostgreSQL's own, durable ones (docs/reliability.md).

    At most ``_FLUSHES`` batches are in flight at once, so one batch waiting on a row lock does
    not hold every Agent up; a batch's writes go in task order, so two batches take their row
    locks in the same order and cannot deadlock each other. Each flusher keeps its own connection
    open, rather than taking one from a pool per batch: a pool resets a connection it is given
    back with one more round trip (``RESET ALL`` and more), which at a busy worker's pace (a batch
    holds a write or two) cost the server more than the writes themselves.
    """

    _BATCH = 256
    _FLUSHES = 2

    def __init__(self, db: DatabaseSettings) -> None:
        url = make_url(db.url)
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False).split("?")[0]
        self._ssl = url.query.get("ssl") or url.query.get("sslmode")
        self._idle: list[Any] = []  # open connections no flusher is using
        self._open: set[Any] = set()
        self._writes: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]] = []
        self._accepts: list[tuple[TaskAccepted, asyncio.Future[Any]]] = []
        self._flushers: set[asyncio.Task[None]] = set()

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._accepts.append((accepted, done))
        self._kick()
        return cast(AcceptOutcome, await done)

    async def write(self, t: StepTransition) -> None:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._writes.append((t.task_id, _pg_write_params(t), done))
        self._kick()
        await done

    def _kick(self) -> None:
        # A flusher that has seen its queue empty is done at once (no await in between), even
        # before its done-callback takes it out of the set: not counting it, nothing is stranded.
        if sum(not f.done() for f in self._flushers) < self._FLUSHES:
            flusher = asyncio.create_task(self._flush())
            self._flushers.add(flusher)
            flusher.add_done_callback(self._flushers.discard)

    async def _flush(self) -> None:
        while self._writes or self._accepts:
            accepts, self._accepts = self._accepts[: self._BATCH], self._accepts[self._BATCH :]
            writes, self._writes = self._writes[: self._BATCH], self._writes[self._BATCH :]
            writes.sort(key=lambda w: w[0])  # stable: one task's writes keep their order
            try:
                conn = await self._connection()
                try:
                    if accepts:
                        await self._apply_accepts(conn, accepts)
                    if writes:
                        await self._apply_writes(conn, writes)
                finally:
                    self._give_back(conn)
            except Exception as err:  # noqa: BLE001 - no connection: handed to every write of the batch
                for done in [d for _, d in accepts] + [d for _, _, d in writes]:
                    _settle(done, err)
            except BaseException:
                # Cancelled (the worker is shutting down): no one will send what is waiting,
                # so its writers must not wait for ever either.
                for done in [d for _, d in accepts + self._accepts] + [d for _, _, d in writes + self._writes]:
                    if not done.done():
                        done.cancel()
                self._accepts, self._writes = [], []
                raise

    async def _apply_writes(self, conn: Any, writes: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]]) -> None:
        try:
            await conn.executemany(_PG_WRITE, [params for _, params, _ in writes])
        except Exception:  # which write? Each alone, so that only the culprit fails
            if conn.is_closed():
                raise
            for _, params, done in writes:
                try:
                    await conn.execute(_PG_WRITE, *params)
                except Exception as err:  # this write's own failure
                    if conn.is_closed():
                        raise
                    _settle(done, err)
                else:
                    _settle(done, None)
            return
        for _, _, done in writes:
            _settle(done, None)

    async def _apply_accepts(self, conn: Any, accepts: list[tuple[TaskAccepted, asyncio.Future[Any]]]) -> None:
        try:
            rows = await conn.fetchmany(_PG_ACCEPT, [_pg_accept_params(a) for a, _ in accepts])
            news = [row["new"] for row in rows]
        except Exception:  # each alone, as for writes
            if conn.is_closed():
                raise
            news = []
            for accepted, done in accepts:
                try:
                    news.append(await conn.fetchval(_PG_ACCEPT, *_pg_accept_params(accepted)))
                except Exception as err:  # this accept's own failure
                    if conn.is_closed():
                        raise
                    _settle(done, err)
                    news.append(None)
        for (accepted, done), new in zip(accepts, news, strict=True):
            if done.done() or new is None:
                continue
            if new:
                _settle(done, AcceptOutcome(status="new"))
                continue
            try:  # the id is taken: by this task's own chain of runs, or by another task
                _settle(done, await _judge_on(conn, accepted))
            except Exception as err:  # this accept's own failure
                if conn.is_closed():
                    raise
                _settle(done, err)

    async def _connection(self) -> Any:
        """An open connection for one flush: an idle one, else a new one (at most one per flusher)."""
        import asyncpg

        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                return conn
            self._open.discard(conn)
        conn = await asyncpg.connect(self._dsn, ssl=self._ssl)
        self._open.add(conn)
        return conn

    def _give_back(self, conn: Any) -> None:
        # Kept only if it is fit for the next batch: open, and not left inside a transaction by
        # a flush that was interrupted; otherwise closed, and the next flush opens another.
        if conn.is_closed() or conn.is_in_transaction():
            self._open.discard(conn)
            conn.terminate()
        else:
            self._idle.append(conn)

    async def aclose(self) -> None:
        if self._flushers:
            await asyncio.wait(self._flushers, timeout=30)
        opened, self._open, self._idle = self._open, set(), []
        for conn in opened:
            try:
                await conn.close(timeout=5)
            except Exception:  # noqa: BLE001 - closing anyway
                conn.terminate()


async def _judge_on(conn: Any, accepted: TaskAccepted) -> AcceptOutcome:
    """An accept that found the task row there: whose it is, and if it is this chain's, adopt it."""
    async with conn.transaction():
        row = await conn.fetchrow(_PG_EXISTING, accepted.task_id)
        outcome = judge_existing(row["chain_id"], row["state"], row["incarnation"], accepted)
        if outcome.status == "same_task":
            await conn.execute(_PG_ADOPT[0], accepted.run_id, accepted.chain_id, accepted.task_id)
            await conn.execute(_PG_ADOPT[1], accepted.chain_id, accepted.task_id)
    return outcome


def _settle(done: asyncio.Future[Any], outcome: Any) -> None:
    """Hand a write its outcome (an exception, or its result), unless its Agent stopped waiting."""
    if done.done():
        return
    if isinstance(outcome, BaseException):
        done.set_exception(outcome)
    else:
        done.set_result(outcome)


def _json(value: dict[str, Any] | None) -> str | None:
    """A step's result (the Processed write) as the JSON text both drivers store; None leaves it."""
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _attempt_row(t: StepTransition, at: Any, complete_by: Any) -> tuple[Any, ...] | None:
    """The kept row of an attempt, for an Agent's write that starts one (it carries LockedBy)."""
    if t.locked_by is None or t.attempt is None:
        return None
    return (
        t.task_id, t.step, str(t.state), t.attempt, t.failure_count or 0, t.locked_by, complete_by, at, t.version,
        t.chain_id, t.run_id,
    )  # fmt: skip


def _naive(value: datetime | None) -> str | None:
    """SQLite stores UTC as text in the format SQLAlchemy's DateTime uses (see tables.UTCDateTime)."""
    return None if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
