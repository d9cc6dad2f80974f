"""An operator fixes a bad input and retries the step that refused it: the order's ship is
refused for an address the carrier cannot deliver to, the address is changed, and ship is
retried with it. The Scheduler checks the change against the type's input model, audits what
changed, tells it in the task's events, and every call from then on carries the new input; the
dry run changes nothing; a change that is not an input, or that changes nothing, is refused
with the reason. (While undoing, or past the pivot unforced, it is refused too: the core's rule,
tests/scheduler/test_core.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError

from sas.state_store.queries import audit_for
from sas.task_models import TaskState, TaskStatus
from sas.task_models.repairs import InputChange
from sas_demo_services.operations import UNDELIVERABLE_ADDRESS
from tests.cli.test_cli import sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

NEW_ADDRESS = "2 Real Street"


async def ship_refused(stack: Stack, task_id: str) -> TaskStatus:
    handle = stack.client.get_workflow_handle(task_id)
    return await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED and s.steps[-1].state == "Failed",
        what="ship refused and waiting for a decision",
    )


async def refused(stack: Stack, task_id: str, **change: Any) -> str:
    """Why the update refuses this change (its validator's reason); fails if it was taken."""
    handle = stack.client.get_workflow_handle(task_id)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update("request_retry_with_input", InputChange(**change))
    return str(err.value.cause)


async def test_a_bad_address_fixed_and_ship_retried_ships_once_to_the_new_address(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("readdress")
    handle = await stack.submit(task_id, order(address=UNDELIVERABLE_ADDRESS))
    status = await ship_refused(stack, task_id)
    assert status.steps[-1].error_type == "RemoteRejected" and "address_rejected" in (status.steps[-1].last_error or "")

    # The dry run (`sas fix-input --dry-run`): the Scheduler's checks, nothing recorded, nothing changed.
    fix = ["fix-input", task_id, "--step", "ship", "--set", f"address={NEW_ADDRESS}", "--reason", "customer called"]
    dry = await sas(stack, *fix, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would retry step ship with address changed" in dry.stdout
    assert (await ship_refused(stack, task_id)).steps[-1].runs == 1

    # Not the type's input: an unknown field, a value its model refuses, a change to nothing.
    assert "no field colour in a OrderInput" in await refused(stack, task_id, fields={"colour": "red"}, reason="x")
    assert "address" in await refused(stack, task_id, fields={"address": ""}, reason="x")
    same = await refused(stack, task_id, fields={"address": UNDELIVERABLE_ADDRESS}, reason="x")
    assert "nothing would change" in same
    # The reserve waits for nothing.
    idle = await refused(stack, task_id, step="reserve", fields={"address": NEW_ADDRESS}, reason="x")
    assert "step reserve is Processed" in idle

    done = await sas(stack, *fix, "--by", "carol")
    assert done.returncode == 0, done.stderr
    assert f"retrying step ship with input address '{UNDELIVERABLE_ADDRESS}' -> '{NEW_ADDRESS}'" in done.stdout
    result = await handle.result()
    assert result.state == TaskState.PROCESSED
    ship = next(s for s in result.steps if s.name == "ship")
    assert ship.state == "Processed" and ship.runs == 2
    # One shipment, made by the retry with the new address (the old one is refused every time).
    shipped = [e for e in await stack.ledger(task_id) if e["service"] == "shipping"]
    assert [e["action"] for e in shipped] == ["ship"]
    async with stack.sessions() as session:
        entries = [a for a in await audit_for(session, task_id) if a.action == "retry with input"]
    [entry] = entries
    assert (entry.actor, entry.reason) == ("carol", "customer called")
    assert f"address '{UNDELIVERABLE_ADDRESS}' -> '{NEW_ADDRESS}'" in entry.changed
    final = await handle.query("status", result_type=TaskStatus)
    assert any("input changed by carol" in e and NEW_ADDRESS in e for e in final.events)
