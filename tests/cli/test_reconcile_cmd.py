"""``sas reconcile``: a row that drifted from Temporal, shown by a dry run, then repaired and audited."""

from __future__ import annotations

from sqlalchemy import update

from sas.state_store.mirror_tables import Step, Task
from sas.state_store.queries import audit_for
from sas.task_models import TaskState
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack


async def test_reconcile_dry_run_then_repair(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("rec")
    assert (await (await stack.submit(task_id)).result()).state == TaskState.PROCESSED
    async with stack.sessions() as session, session.begin():  # a lost write: ship still "running"
        await session.execute(
            update(Step).where(Step.task_id == task_id, Step.name == "ship").values(state="Processing")
        )
        await session.execute(update(Task).where(Task.task_id == task_id).values(state="Processing"))

    planned = as_json(await sas(stack, "reconcile", "--task", task_id, "--dry-run", "--json"))
    assert planned["dry_run"] is True
    assert planned["tasks"] == [
        {
            "task_id": task_id,
            "temporal": "completed",
            "repairs": ["ship: Processing -> Processed", "(task): Processing -> Processed"],
        }
    ]
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Processed", "ship": "Processing"}

    done = await sas(stack, "reconcile", "--task", task_id)
    assert done.returncode == 0, done.stderr
    assert "1 tasks checked; 2 rows repaired" in done.stdout
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Processed", "ship": "Processed"}
    assert await stack.task_state(task_id) == "Processed"
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    assert [(a.action, a.actor) for a in audit] == [("reconcile", "supervisor")]
    # Nothing left to do: a second run changes nothing.
    again = as_json(await sas(stack, "reconcile", "--task", task_id, "--json"))
    assert again["tasks"][0]["repairs"] == []
    assert await stack.decisions(task_id) == []
