"""``sas submit --wait`` says the task's outcome with its exit code (docs/cli.md, "Exit codes"):
0 done, 3 undone as a whole, 4 waiting for an operator, 5 its workflow failed or was closed. A
script can then tell a task that was undone from one that was done."""

from __future__ import annotations

import asyncio
import json

from sas.task_models import OperatorRequest
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack


async def test_wait_exits_0_when_done_and_3_when_undone(stack: Stack) -> None:
    done_id, undone_id = fresh_id("wait-done"), fresh_id("wait-undone")
    done = await sas(stack, "submit", *ORDER_FLAGS, "--id", done_id, "--wait", "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert (said["state"], said["exit_code"], said["result"]["state"]) == ("Processed", 0, "Processed")

    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=undone_id)
    undone = await sas(stack, "submit", *ORDER_FLAGS, "--id", undone_id, "--wait")
    assert undone.returncode == 3, undone.stderr
    assert "Compensated: undone as a whole" in undone.stdout


async def test_wait_exits_4_when_the_task_is_parked_for_an_operator(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("wait-parked")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    waiting = asyncio.ensure_future(sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", timeout=60)
    handle = stack.client.get_workflow_handle(task_id)
    await handle.signal("park", OperatorRequest(by="dana", reason="card network down", step="charge"))
    parked = await asyncio.wait_for(waiting, timeout=90)
    assert parked.returncode == 4, parked.stderr
    said = json.loads(parked.stdout)
    assert said["state"] == "Error" and "step charge waits for an operator" in said["detail"]


async def test_wait_exits_5_when_the_workflow_is_closed_from_outside(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("wait-closed")
    await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    waiting = asyncio.ensure_future(sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed", timeout=60)
    await stack.client.get_workflow_handle(task_id).terminate(reason="closed by a test")
    closed = await asyncio.wait_for(waiting, timeout=90)
    assert closed.returncode == 5, closed.stderr
    said = json.loads(closed.stdout)
    assert said["state"] == "Terminated" and "closed by a test" in said["detail"]
