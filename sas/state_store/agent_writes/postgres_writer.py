"""The Agents' writer on PostgreSQL: a small asyncpg pool."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from sqlalchemy.engine import make_url

from sas.settings import DatabaseSettings
from sas.state_store.agent_writes.statements import PG, accept_ids
from sas.state_store.agent_writes.writer import WritesBehind
from sas.state_store.mirror_rules import (
    judge_existing,
    new_step_params,
    new_task_params,
    starts_attempt,
    transition_params,
)
from sas.task_models import AcceptOutcome, StepTransition, TaskAccepted

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
        ids = accept_ids(accepted)
        task = PG.new_task.args(PG.prepared(new_task_params(accepted, at)))
        if await conn.execute(PG.new_task.sql, *task) != "INSERT 0 0":
            steps = PG.new_step.many([PG.prepared(row) for row in new_step_params(accepted, at)])
            await conn.executemany(PG.new_step.sql, steps)
            return AcceptOutcome(status="new")
        row = await conn.fetchrow(PG.existing.sql, *PG.existing.args(ids))
        outcome = judge_existing(row["chain_id"], row["state"], row["incarnation"], accepted)
        if outcome.status == "same_task":
            await conn.execute(PG.adopt_task.sql, *PG.adopt_task.args(ids))
            await conn.execute(PG.adopt_steps.sql, *PG.adopt_steps.args(ids))
        return outcome

    async def write(self, t: StepTransition) -> None:
        params = PG.prepared(transition_params(t))
        # The step, its task and its attempt, all or none: one statement (rules.TRANSITION_AS_ONE).
        statement = PG.transition[(t.task_state is not None, starts_attempt(t))]
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
