"""Where the SQLite hot-path writer applies a batch: a small batch of step transitions on the
event loop, without ever waiting there; whatever may wait (an accept's sync to disk, a write
lock held elsewhere, the WAL's checkpoints) on its own thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.agent_writes.sqlite_writer import SqliteStepWriter
from sas.state_store.engine import sqlite_path
from sas.task_models import StepState, TaskState
from sas.task_models.versions import Phase
from tests.helpers import fresh_id
from tests.state_store.test_mirror import accepted, transition


@pytest.fixture
async def sqlite_writer(tmp_path: Path) -> AsyncIterator[tuple[SqliteStepWriter, Path]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await state_store.upgrade_async(url)
    writer = make_step_writer(DatabaseSettings(url=url))
    assert isinstance(writer, SqliteStepWriter)
    path = sqlite_path(url)
    assert path is not None
    try:
        yield writer, Path(path)
    finally:
        await writer.aclose()


def _reserve_state(path: Path, task_id: str) -> str:
    with sqlite3.connect(path) as db:
        return str(
            db.execute("SELECT state FROM steps WHERE task_id = ? AND name = 'reserve'", (task_id,)).fetchone()[0]
        )


def _synchronous(db: sqlite3.Connection) -> int:
    return int(db.execute("PRAGMA synchronous").fetchone()[0])


async def test_an_accept_is_synced_to_disk_and_transitions_are_not(sqlite_writer) -> None:
    """The durability split of docs/reliability.md: a commit holding an accept runs with
    ``synchronous=FULL`` (on disk before the accept returns); a batch of step transitions
    alone runs with ``NORMAL`` (reconciliation writes a lost one back from Temporal)."""
    writer, _ = sqlite_writer
    task_id = fresh_id("dur")
    # Queued together, the accept and the probe share one batch, so one commit.
    outcome, in_accept_batch = await asyncio.gather(writer.accept(accepted(task_id)), writer._submit(_synchronous))
    assert outcome.status == "new" and in_accept_batch == 2  # FULL
    _, in_transition_batch = await asyncio.gather(
        writer.write(transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED)), writer._submit(_synchronous)
    )
    assert in_transition_batch == 1  # NORMAL


async def test_a_batch_of_transitions_commits_on_the_event_loop_and_an_accept_on_the_thread(sqlite_writer) -> None:
    """Handing a write to a thread and back costs more than a small batch's statements, which
    only write pages to the WAL: transitions commit on the event loop, where the connection
    never waits for a lock (its busy timeout is 0 there). An accept syncs to disk, which may
    take long, so it commits on the writer's thread, which waits for a lock."""
    writer, path = sqlite_writer
    loop_thread = threading.get_ident()
    task_id = fresh_id("here")

    def where(db: sqlite3.Connection) -> tuple[int, int]:
        return threading.get_ident(), int(db.execute("PRAGMA busy_timeout").fetchone()[0])

    _, accepted_on = await asyncio.gather(writer.accept(accepted(task_id)), writer._submit(where))
    _, written_on = await asyncio.gather(
        writer.write(transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED)), writer._submit(where)
    )
    assert accepted_on[0] != loop_thread and accepted_on[1] > 0
    assert written_on == (loop_thread, 0)
    assert _reserve_state(path, task_id) == "Processing"


async def test_a_write_lock_held_elsewhere_is_waited_for_off_the_event_loop(sqlite_writer) -> None:
    """Another connection holds the database's write lock: the write waits for it on the
    writer's thread while the event loop goes on (here, it runs the code that releases the
    lock), and lands once the lock is released. Waited for on the loop, it would hold the loop
    for the whole busy timeout and then fail."""
    writer, path = sqlite_writer
    task_id = fresh_id("lock")
    await writer.accept(accepted(task_id))  # the writer's connection is open
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(
            writer.write(
                transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED, task_state=TaskState.PROCESSING)
            )
        )
        for _ in range(20):  # the loop keeps turning while the write waits for the lock
            await asyncio.sleep(0)
        assert not pending.done()
        holder.execute("COMMIT")
        await asyncio.wait_for(pending, timeout=30)
    finally:
        holder.close()
    assert _reserve_state(path, task_id) == "Processing"


async def test_the_writer_checkpoints_the_wal_itself(sqlite_writer) -> None:
    """The writer's connection never checkpoints on a commit (a commit on the event loop must
    not copy the WAL back and sync the file): its thread checkpoints every so many commits, so
    the WAL is reused from its start instead of growing with every write."""
    writer, path = sqlite_writer
    writer._CHECKPOINT_EVERY = 4
    task_ids = [fresh_id("wal") for _ in range(4)]
    for task_id in task_ids:
        await writer.accept(accepted(task_id))
    commits = 200
    for seq in range(1, commits + 1):  # one at a time: a commit each
        task_id = task_ids[seq % len(task_ids)]
        await writer.write(transition(task_id, seq, StepState.PROCESSING, 1, Phase.AGENT_STARTED))
    with sqlite3.connect(path) as db:
        _busy, frames_in_wal, _copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    # Every commit writes at least one frame: without the writer's checkpoints the WAL would
    # hold 200 or more; with them, only what the last few commits wrote.
    assert frames_in_wal < commits // 2
