"""The dead letter: tasks parked as Error, listed with their FailureCount, and taken out with
`sas resubmit`, which resets FailureCount, retries, and is audited."""

from __future__ import annotations

import httpx

from sas.task_models import TaskState, TaskStatus
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import ADMIN_HEADERS, Stack


async def test_parked_task_is_listed_then_resubmitted_and_audited(stack: Stack) -> None:
    task_id = fresh_id("dlq")
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
    )
    refund_down = await stack.add_fault(endpoint="payment.refund", kind="transient", match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Error", timeout=120, what="parked as Error")

    dead = as_json(await sas(stack, "list", "--state", "error", "--json"))
    mine = [t for t in dead if t["task_id"] == task_id]
    assert len(mine) == 1 and mine[0]["failure_count"] >= 1
    parked = next(s for s in (await stack.record(task_id)).steps if s.name == "charge")  # type: ignore[union-attr]
    assert parked.state == "Error" and parked.failure_count >= 1

    async with httpx.AsyncClient() as http:
        (
            await http.delete(f"{stack.services_url}/admin/faults/{refund_down}", headers=ADMIN_HEADERS)
        ).raise_for_status()
    done = await sas(stack, "resubmit", task_id, "--by", "alice", "--reason", "refund service fixed")
    assert done.returncode == 0, done.stderr
    assert "FailureCount reset" in done.stdout

    assert (await handle.result()).state == TaskState.COMPENSATED
    charge = next(s for s in (await stack.record(task_id)).steps if s.name == "charge")  # type: ignore[union-attr]
    assert charge.state == "Compensated" and charge.failure_count == 0 and charge.resets == 1
    refunds = [e for e in await stack.ledger(task_id) if e["action"] == "refund"]
    assert len(refunds) == 1

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    # The Supervisor's own requests are audited too; the person's is alice's.
    actions = [a for a in shown["operator_actions"] if a["actor"] != "supervisor"]
    assert [(a["action"], a["actor"], a["reason"]) for a in actions] == [("resubmit", "alice", "refund service fixed")]
    assert any(a["actor"] == "supervisor" for a in shown["operator_actions"])
    assert "FailureCount" in actions[0]["changed"] and "-> 0" in actions[0]["changed"]
    assert any(d["kind"] == "park" for d in shown["decisions"])
    status = await handle.query("status", result_type=TaskStatus)
    assert any("retry by alice: refund service fixed" in e for e in status.events)
