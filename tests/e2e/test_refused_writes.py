"""A write the state store refuses for good (a constraint, a value it can't store) is given up,
never retried for ever, and raises one alert; the task itself goes on as Temporal runs it.

The refusal is real: a trigger in the test's database refuses one task's write, as a
constraint or a value out of range would. Run on SQLite and PostgreSQL (``stack_any_db``)."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sas.task_models import TaskResult, TaskState
from sas.task_models.errors import MIRROR_WRITE_REFUSED
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

DECLINED = "4000000000000002"


async def refuse(stack: Stack, name: str, when: str, table: str, event: str) -> None:
    """Make the database refuse the writes on ``table`` for which ``when`` (over NEW) holds."""
    async with stack.sessions() as session, session.begin():
        if stack.settings.database.url.startswith("sqlite"):
            await session.execute(
                text(
                    f"CREATE TRIGGER {name} BEFORE {event} ON {table} WHEN {when} "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test''s constraint'); END"
                )
            )
        else:
            await session.execute(
                text(
                    f"CREATE FUNCTION {name}() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
                    "'refused by the test''s constraint' USING ERRCODE = 'check_violation'; END $$ LANGUAGE plpgsql"
                )
            )
            await session.execute(
                text(
                    f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION {name}()"
                )
            )


def refused_alerts(alerts: list) -> list:
    return [a for a in alerts if a.kind == "mirror_write_rejected"]


async def test_an_agents_refused_write_is_given_up_and_the_order_completes(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("refuse")
    await refuse(
        stack,
        f"refuse_{task_id.replace('-', '_')}",
        f"NEW.task_id = '{task_id}' AND NEW.name = 'charge' AND NEW.state = 'Processed'",
        "steps",
        "UPDATE",
    )
    handle = await stack.submit(task_id)
    result: TaskResult = await handle.result()
    # Temporal ran the order to its end; the refused write did not fail or repeat the charge.
    assert result.state == TaskState.PROCESSED
    assert [e["action"] for e in await stack.ledger(task_id) if e["service"] == "payment"] == ["charge"]
    # The mirror row is stale (it could not be written) and an operator is told, once.
    assert (await stack.step_states(task_id))["charge"] == "Processing"
    alerts = await wait_until(
        lambda: stack.alerts(task_id), lambda a: len(refused_alerts(a)) >= 1, timeout=30, what="the alert"
    )
    [alert] = refused_alerts(alerts)
    assert alert.step == "charge" and alert.status == "open"
    # The driver's own error class: IntegrityError (SQLite), CheckViolationError (asyncpg).
    assert "refused by the test's constraint" in (alert.last_error or "")
    assert "sas reconcile" in alert.suggested_action


async def test_a_refused_accept_fails_the_task_at_once_and_nothing_is_done(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("refuse")
    await refuse(stack, f"refuse_{task_id.replace('-', '_')}", f"NEW.task_id = '{task_id}'", "tasks", "INSERT")
    handle = await stack.submit(task_id)
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    # A local activity's error reaches the workflow as it was raised (no ActivityError around it).
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == MIRROR_WRITE_REFUSED and cause.non_retryable
    assert "refused the accept write for good" in cause.message
    assert await stack.ledger(task_id) == []
    assert await stack.record(task_id) is None
    [alert] = refused_alerts(await stack.alerts(task_id))
    assert alert.kind == "mirror_write_rejected" and alert.step is None


async def test_a_refused_scheduler_write_does_not_stop_the_saga(stack_any_db: Stack) -> None:
    """The Scheduler's own mirror write (here the task's final Compensated) is refused: the
    workflow still ends Compensated instead of retrying that write for ever."""
    stack = stack_any_db
    task_id = fresh_id("refuse")
    await refuse(
        stack,
        f"refuse_{task_id.replace('-', '_')}",
        f"NEW.task_id = '{task_id}' AND NEW.state = 'Compensated'",
        "tasks",
        "UPDATE",
    )
    handle = await stack.submit(task_id, order(card=DECLINED))
    result: TaskResult = await handle.result()
    assert result.state == TaskState.COMPENSATED
    assert await stack.task_state(task_id) != "Compensated"
    alerts = refused_alerts(await stack.alerts(task_id))
    assert len(alerts) == 1 and "refused by the test's constraint" in (alerts[0].last_error or "")
