"""The PostgreSQL hot-path writer's durability split (docs/reliability.md): an accept commits
with ``synchronous_commit=on``, on disk before it returns; a step transition commits without
waiting for the WAL's flush, as the SQLite writer's ``synchronous=NORMAL`` does, since the
Supervisor's reconciliation writes a lost one back from Temporal."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.agent_writes.postgres_writer import PostgresStepWriter
from sas.task_models import StepState
from sas.task_models.versions import Phase
from tests.helpers import fresh_id
from tests.postgres import fresh_database, require_postgres
from tests.state_store.test_mirror import accepted, transition

# Each row the writer inserts or updates records the synchronous_commit its transaction runs
# with: what the commit that follows waits for.
_WATCH = """
CREATE TABLE commit_settings (tbl text, op text, setting text);
CREATE FUNCTION note_setting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO commit_settings VALUES (TG_TABLE_NAME, TG_OP, current_setting('synchronous_commit'));
    RETURN NEW;
END $$;
CREATE TRIGGER note_task AFTER INSERT OR UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION note_setting();
CREATE TRIGGER note_step AFTER INSERT OR UPDATE ON steps FOR EACH ROW EXECUTE FUNCTION note_setting();
"""


@pytest.fixture
async def watched() -> AsyncIterator[tuple[PostgresStepWriter, asyncpg.Connection]]:
    require_postgres()
    with fresh_database() as url:
        await state_store.upgrade_async(url)
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"))
        writer = make_step_writer(DatabaseSettings(url=url))
        assert isinstance(writer, PostgresStepWriter)
        try:
            await conn.execute(_WATCH)
            yield writer, conn
        finally:
            await writer.aclose()
            await conn.close()


async def _seen(conn: asyncpg.Connection) -> set[tuple[str, str, str]]:
    rows = await conn.fetch("DELETE FROM commit_settings RETURNING tbl, op, setting")
    return {(r["tbl"], r["op"], r["setting"]) for r in rows}


async def test_an_accept_waits_for_the_flush_to_disk_and_a_transition_does_not(watched) -> None:
    writer, conn = watched
    task_id = fresh_id("pgdur")

    assert (await writer.accept(accepted(task_id))).status == "new"
    assert await _seen(conn) == {("tasks", "INSERT", "on"), ("steps", "INSERT", "on")}

    await writer.write(transition(task_id, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED, task_state="Processing"))
    assert await _seen(conn) == {("tasks", "UPDATE", "off"), ("steps", "UPDATE", "off")}
    # The transition landed, committed: a fresh session reads it.
    assert await conn.fetchval("SELECT state FROM steps WHERE task_id = $1 AND name = 'reserve'", task_id) == (
        "Processing"
    )

    # The next accept on the same pooled session is durable again: the setting was the
    # accept's transaction's own, not left on the session.
    again = fresh_id("pgdur")
    assert (await writer.accept(accepted(again))).status == "new"
    assert {setting for _, _, setting in await _seen(conn)} == {"on"}
    await writer.write(transition(again, 1, StepState.PROCESSING, 1, Phase.AGENT_STARTED))
    assert {setting for _, _, setting in await _seen(conn)} == {"off"}


async def test_an_accept_that_fails_midway_leaves_nothing_and_the_session_is_reused(watched) -> None:
    """The accept's transaction is its own (BEGIN with the durable setting in one round trip):
    a failure after the task's row is written rolls it back, and the pooled session goes on."""
    writer, conn = watched
    await conn.execute("""
        CREATE FUNCTION refuse_steps() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.task_id LIKE 'refused-%' THEN RAISE EXCEPTION 'refused by the test'; END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER refuse BEFORE INSERT ON steps FOR EACH ROW EXECUTE FUNCTION refuse_steps();
    """)
    refused = fresh_id("refused")
    with pytest.raises(asyncpg.RaiseError, match="refused by the test"):
        await writer.accept(accepted(refused))
    assert await conn.fetchval("SELECT count(*) FROM tasks WHERE task_id = $1", refused) == 0

    kept = fresh_id("pgdur")
    assert (await writer.accept(accepted(kept))).status == "new"
    assert await conn.fetchval("SELECT count(*) FROM steps WHERE task_id = $1", kept) == len(accepted(kept).steps)
    assert {setting for _, _, setting in await _seen(conn)} == {"on"}
