"""Bench-only: the Agents' mirror writes on the raw SQLite driver instead of an ORM session
(the core change that bench/write_cost.py suggests), patched into sas's worker code by
``python -m bench._worker sas-variant --raw-mirror``. Same rows, same version ordering:
one prepared UPDATE of the step (and one of the task) in one IMMEDIATE transaction on a
connection the process keeps open."""

from __future__ import annotations

import asyncio
from datetime import UTC
from typing import Any

import aiosqlite

from activities.agent import Agent
from state_store.engine import sqlite_path
from task_models import StepCall, StepTransition
from task_models.versions import version_of

_STEP = (
    "UPDATE steps SET state=?, version=?, updated_at=?, locked_by=?, complete_by=?, attempt=COALESCE(?, attempt), "
    "failure_count=MAX(failure_count, COALESCE(?, failure_count)), "
    "last_error=CASE WHEN ? THEN NULL ELSE last_error END, error_type=CASE WHEN ? THEN NULL ELSE error_type END "
    "WHERE task_id=? AND name=? AND version<?"
)
_TASK = "UPDATE tasks SET state=?, current_step=?, version=?, updated_at=? WHERE task_id=? AND version<?"


def _ts(value: Any) -> str | None:
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")


class RawWriter:
    def __init__(self, url: str) -> None:
        self._path = sqlite_path(url)
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    async def write(self, t: StepTransition) -> None:
        async with self._lock:
            if self._db is None:
                self._db = await aiosqlite.connect(self._path, isolation_level=None)
                await self._db.execute("PRAGMA journal_mode=WAL")
                await self._db.execute("PRAGMA synchronous=NORMAL")
                await self._db.execute("PRAGMA busy_timeout=30000")
            done = t.state in ("Processed", "Compensated")
            at = _ts(t.at)
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                await self._db.execute(_STEP, (str(t.state), t.version, at, t.locked_by, _ts(t.complete_by), t.attempt,
                                               t.failure_count, done, done, t.task_id, t.step, t.version))
                if t.task_state is not None:
                    await self._db.execute(_TASK, (str(t.task_state), t.step, t.version, at, t.task_id, t.version))
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise


def install(url: str) -> None:
    writer = RawWriter(url)

    async def _record(self: Agent, call: StepCall, phase: Any, attempt: int, **fields: Any) -> None:
        from datetime import datetime

        await writer.write(StepTransition(task_id=call.task_id, step=call.step,
                                          version=version_of(call.stamp.seq, attempt, phase), at=datetime.now(UTC),
                                          attempt=attempt, failure_count=call.stamp.failure_count, **fields))

    Agent._record = _record  # type: ignore[method-assign]
