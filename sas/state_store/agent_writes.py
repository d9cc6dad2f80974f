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
_PG_STEP = (
    "UPDATE steps SET state=$1, version=$2, updated_at=$3, locked_by=$4, complete_by=$5,"
    " attempt=COALESCE($6, attempt), failure_count=GREATEST(failure_count, COALESCE($7, failure_count)),"
    " last_error=CASE WHEN $8 THEN NULL ELSE last_error END, error_type=CASE WHEN $8 THEN NULL ELSE error_type END,"
    " run_id=COALESCE($11, run_id), result=COALESCE($13, result)"
    " WHERE task_id=$9 AND name=$10 AND version<$2 AND (chain_id IS NULL OR chain_id=$12)"
)
_SQLITE_TASK = (
    "UPDATE tasks SET state=?, current_step=?, version=?, updated_at=?, run_id=COALESCE(?, run_id)"
    " WHERE task_id=? AND version<? AND (chain_id IS NULL OR chain_id=?)"
)
_PG_TASK = (
    "UPDATE tasks SET state=$1, current_step=$2, version=$3, updated_at=$4, run_id=COALESCE($6, run_id)"
    " WHERE task_id=$5 AND version<$3 AND (chain_id IS NULL OR chain_id=$7)"
)
# An attempt's start (the Agent's write with LockedBy) is also kept as a row of its own, in
# the same transaction and only if the step write applied (so only for the task's own chain).
_ATTEMPT_COLUMNS = (
    "task_id, step, state, attempt, failure_count, locked_by, complete_by, started_at, version, chain_id, run_id"
)
_SQLITE_ATTEMPT = (
    f"INSERT INTO step_attempts ({_ATTEMPT_COLUMNS}) VALUES ({', '.join('?' * 11)}) ON CONFLICT DO NOTHING"
)
_PG_ATTEMPT = (
    f"INSERT INTO step_attempts ({_ATTEMPT_COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, 12))})"
    " ON CONFLICT DO NOTHING"
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
_PG_NEW_TASK = (
    f"INSERT INTO tasks ({_TASK_COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, 15))}) ON CONFLICT DO NOTHING"
)
_PG_NEW_STEP = (
    f"INSERT INTO steps ({_STEP_COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, 22))}) ON CONFLICT DO NOTHING"
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
    """Group commit on one connection, owned by one thread.

    SQLite serialises writers anyway, so concurrent writes are queued and applied
    together, in one transaction per batch, with a single hop to the writer thread -
    instead of an event-loop/thread round trip per statement. Each write runs under
    its own savepoint, so a write that fails for its own reasons fails alone; a
    failure of the database itself (locked, I/O) fails the batch, and each Agent then
    retries its own write, which is safe because the writes are versioned.
    """

    _BATCH = 256

    def __init__(self, path: str) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None  # used only on the writer thread
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
                durable = any(d for _, _, d in batch)
                outcomes = await loop.run_in_executor(self._thread, self._apply, [run for run, _, _ in batch], durable)
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
        if self._db is None:
            self._db = sqlite3.connect(self._path, isolation_level=None, timeout=30)
            for pragma in ("busy_timeout=30000", "journal_mode=WAL"):  # wait for a lock, even here
                self._db.execute(f"PRAGMA {pragma}")
            self._synchronous = ""
        db = self._db
        synchronous = "FULL" if durable else "NORMAL"
        if synchronous != self._synchronous:
            db.execute(f"PRAGMA synchronous={synchronous}")
            self._synchronous = synchronous
        outcomes: list[tuple[bool, Any]] = []
        try:
            db.execute("BEGIN IMMEDIATE")
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
            db.execute("COMMIT")
        except BaseException:
            self._close()
            raise
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
        if self._flusher is not None and not self._flusher.done():
            await asyncio.wait([self._flusher], timeout=30)
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        # A writer can still be used after closing; its next batch starts a new thread and connection.
        thread, self._thread = self._thread, ThreadPoolExecutor(1, thread_name_prefix="sas-step-writer")
        thread.shutdown(wait=False)


class PostgresStepWriter:
    """A small asyncpg pool: PostgreSQL takes concurrent writers, so no batching is needed."""

    def __init__(self, db: DatabaseSettings) -> None:
        url = make_url(db.url)
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False).split("?")[0]
        self._ssl = url.query.get("ssl") or url.query.get("sslmode")
        self._size = db.pool_size
        self._pool: Any = None
        self._starting = asyncio.Lock()

    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        at = accepted.accepted_at.astimezone(UTC)
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            if await conn.execute(_PG_NEW_TASK, *_new_task_row(accepted, at)) != "INSERT 0 0":
                await conn.executemany(_PG_NEW_STEP, _new_step_rows(accepted, at))
                return AcceptOutcome(status="new")
            row = await conn.fetchrow(_PG_EXISTING, accepted.task_id)
            outcome = judge_existing(row["chain_id"], row["state"], row["incarnation"], accepted)
            if outcome.status == "same_task":
                await conn.execute(_PG_ADOPT[0], accepted.run_id, accepted.chain_id, accepted.task_id)
                await conn.execute(_PG_ADOPT[1], accepted.chain_id, accepted.task_id)
            return outcome

    async def write(self, t: StepTransition) -> None:
        pool = await self._get_pool()
        async with pool.acquire() as conn, conn.transaction():
            applied = await conn.execute(
                _PG_STEP,
                str(t.state),
                t.version,
                t.at,
                t.locked_by,
                t.complete_by,
                t.attempt,
                t.failure_count,
                t.state in _CLEARS_ERROR,
                t.task_id,
                t.step,
                t.run_id,
                t.chain_id,
                _json(t.result),
            )
            if t.task_state is not None:
                await conn.execute(
                    _PG_TASK, str(t.task_state), t.step, t.version, t.at, t.task_id, t.run_id, t.chain_id
                )
            attempt = _attempt_row(t, t.at, t.complete_by)
            if attempt is not None and applied != "UPDATE 0":
                await conn.execute(_PG_ATTEMPT, *attempt)

    async def _get_pool(self) -> Any:
        import asyncpg

        async with self._starting:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(self._dsn, min_size=1, max_size=self._size, ssl=self._ssl)
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


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
