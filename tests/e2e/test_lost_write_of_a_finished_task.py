"""No mirror write is lost for good, even for a task that then finished (issue 23's chaos finding).

In a chaos run an order's workflow completed with every step Processed while the mirror said
task Processed, charge Pending: during a database outage the charge Agent went on without its
Processing and Processed rows, the later steps' writes landed (the last one marks the task
Processed), and reconciliation never looked at a task whose row says it finished. Here the
database fails exactly the charge Agent's writes - on PostgreSQL as a server that cannot take
connections does (SQLSTATE 57P03: the Agent retries, then goes on without its row); SQLite has
no such error for a trigger to raise, so there they are dropped - and the Supervisor, running
as it does, must bring the row in line with Temporal, audited."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy import text
from temporalio.client import Client

from sas.settings import SupervisorSettings
from sas.state_store.queries import audit_for
from sas.task_models import TaskResult, TaskState
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, start_stack


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    request.getfixturevalue("postgres_required")
    from tests.postgres import fresh_database

    with ExitStack() as stack:
        yield stack.enter_context(fresh_database())


async def lose_agent_writes(stack: Stack, task_id: str, step: str) -> None:
    """The database fails (PostgreSQL) or drops (SQLite) the step's writes by its Agent - they
    carry its attempt; a repair from Temporal does not."""
    name = f"lose_{task_id.replace('-', '_')}"
    when = f"NEW.task_id = '{task_id}' AND NEW.name = '{step}' AND NEW.attempt > 0"
    async with stack.sessions() as session, session.begin():
        if stack.settings.database.url.startswith("sqlite"):
            await session.execute(
                text(f"CREATE TRIGGER {name} BEFORE UPDATE ON steps WHEN {when} BEGIN SELECT RAISE(IGNORE); END")
            )
            return
        await session.execute(
            text(
                f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
                "'the database is away (the test''s outage)' USING ERRCODE = 'cannot_connect_now'; END $$ "
                "LANGUAGE plpgsql"
            )
        )
        await session.execute(
            text(f"CREATE TRIGGER {name} BEFORE UPDATE ON steps FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION {name}()")
        )


async def test_a_step_write_lost_while_its_task_finished_is_written_from_temporal(
    client: Client, temporal_address: str, services: ServiceProcess, any_db: str
) -> None:
    supervisor = SupervisorSettings(
        interval_s=0.5, failure_threshold=3, overdue_grace_s=1.5, cooldown_tries=0,
        orphan_after_s=2.0, orphan_check_s=0.5, workflow_id=f"supervisor-{fresh_id('lost')}",
    )  # fmt: skip
    async with start_stack(client, temporal_address, services.url, any_db, supervisor_settings=supervisor) as stack:
        task_id = fresh_id("lost")
        await lose_agent_writes(stack, task_id, "charge")
        result: TaskResult = await (await stack.submit(task_id)).result()
        assert result.state == TaskState.PROCESSED
        assert [s.state for s in result.steps] == ["Processed"] * 3
        # The chaos run's mirror: the task finished, its charge never written. Nothing scans a
        # Pending step, and before issue 23 nothing looked at a finished task again.
        assert (await stack.task_state(task_id), await stack.step_states(task_id)) == (
            "Processed",
            {"reserve": "Processed", "charge": "Pending", "ship": "Processed"},
        )
        await wait_until(
            lambda: stack.step_states(task_id),
            lambda s: s.get("charge") == "Processed",
            timeout=60,
            what="the Supervisor to write the charge row from Temporal",
        )
        record = await stack.record(task_id)
        assert record is not None and record.task.state == "Processed"
        charge = next(s for s in record.steps if s.name == "charge")
        assert charge.result == next(s.result for s in result.steps if s.name == "charge")
        async with stack.sessions() as session:
            audit = await audit_for(session, task_id)
        assert [(a.action, a.actor, a.changed) for a in audit] == [
            ("reconcile", "supervisor", "charge: Pending -> Processed")
        ]
        assert [e["action"] for e in await stack.ledger(task_id) if e["service"] == "payment"] == ["charge"]
