"""A task id is one task, as `sas` shows it: `sas submit` of an existing id exits non-zero
naming the task's state, and `sas resubmit` of a finished Compensated task runs its next
incarnation under new rows and keys, archived and audited. Run on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx

from sas.task_models import TaskResult, TaskState
from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.helpers import fresh_id
from tests.stack import ADMIN_HEADERS, Stack, order

# A card the payment service declines: the order is compensated.
DECLINED = "4000000000000002"


async def test_a_compensated_order_is_resubmitted_as_a_new_incarnation(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("again")
    ship_refused = await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
    )
    first = await stack.submit(task_id)
    assert (await first.result()).state == TaskState.COMPENSATED
    first_effects = await stack.ledger(task_id)
    assert first_effects, "the first incarnation reserved and charged before it was undone"

    again = await sas(stack, "submit", "--id", task_id, *ORDER_FLAGS)
    assert again.returncode != 0
    assert f"task {task_id} already exists and is Compensated" in again.stderr
    assert f"sas resubmit {task_id}" in again.stderr

    async with httpx.AsyncClient() as http:
        removed = await http.delete(f"{stack.services_url}/admin/faults/{ship_refused}", headers=ADMIN_HEADERS)
        removed.raise_for_status()
    done = await sas(stack, "resubmit", task_id, "--by", "alice", "--reason", "address fixed")
    assert done.returncode == 0, done.stderr
    assert "incarnation 2" in done.stdout

    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED
    effects = await stack.ledger(task_id)
    old = [e for e in effects if "#2:" not in e["idempotency_key"]]
    new = [e for e in effects if "#2:" in e["idempotency_key"]]
    assert old == first_effects, "the first incarnation's effects are untouched"
    assert {e["action"] for e in new} >= {"reserve", "charge", "ship"}
    assert all(e["idempotency_key"].startswith(f"{task_id}#2:") for e in new)

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    assert shown["task"]["incarnation"] == 2 and shown["task"]["state"] == "Processed"
    archived = shown["archived_incarnations"]
    assert [(a["incarnation"], a["state"]) for a in archived] == [(1, "Compensated")]
    assert archived[0]["steps"]["charge"] == "Compensated"
    resubmits = [a for a in shown["operator_actions"] if a["action"] == "resubmit"]
    assert [(a["actor"], a["reason"]) for a in resubmits] == [("alice", "address fixed")]
    assert all(s["idempotency_key"].startswith(f"{task_id}#2:") for s in shown["steps"])
    assert "earlier incarnations" in (await sas(stack, "show", task_id)).stdout

    refused = await sas(stack, "resubmit", task_id, "--reason", "once more")
    assert refused.returncode != 0 and f"{task_id} is Processed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) <= 2  # the error and its hint
    resubmitted_again = await sas(stack, "submit", "--id", task_id, *ORDER_FLAGS)
    assert resubmitted_again.returncode != 0
    assert f"task {task_id} already exists and is Processed" in resubmitted_again.stderr
    assert await stack.ledger(task_id) == effects


async def test_submit_of_a_running_task_exits_non_zero(stack: Stack) -> None:
    task_id = fresh_id("later")
    started = await sas(stack, "submit", "--id", task_id, "--in", "1h", *ORDER_FLAGS)
    assert started.returncode == 0, started.stderr
    again = await sas(stack, "submit", "--id", task_id, *ORDER_FLAGS)
    assert again.returncode != 0
    assert f"task {task_id} is already running" in again.stderr
    await stack.client.get_workflow_handle(task_id).terminate("test over")


async def test_two_operators_resubmitting_at_once_start_one_incarnation(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("race")
    first = await stack.submit(task_id, order(card=DECLINED))
    assert (await first.result()).state == TaskState.COMPENSATED
    # Keep the new incarnation in flight (its reserve hangs), so the two requests really meet it:
    # a declined card would compensate it again within a second, and a resubmission that looked
    # after that would rightly resubmit incarnation 2.
    await stack.add_fault(endpoint="inventory.reserve", kind="hang", hang_s=30, times=1, match_order_id=task_id)

    both = await asyncio.gather(
        sas(stack, "resubmit", task_id, "--by", "alice", "--reason", "r1"),
        sas(stack, "resubmit", task_id, "--by", "bob", "--reason", "r2"),
    )
    won = [d for d in both if d.returncode == 0]
    lost = [d for d in both if d.returncode != 0]
    assert len(won) == 1 and "incarnation 2" in won[0].stdout, [(d.stdout, d.stderr) for d in both]
    # The other is told why, in one line and its hint: the task changed under it, or is running.
    assert len(lost) == 1 and task_id in lost[0].stderr and "Traceback" not in lost[0].stderr
    assert len(lost[0].stderr.strip().splitlines()) <= 2

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    assert shown["task"]["incarnation"] == 2
    assert [a["incarnation"] for a in shown["archived_incarnations"]] == [1]
    assert len([a for a in shown["operator_actions"] if a["action"] == "resubmit"]) == 1
