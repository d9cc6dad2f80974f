"""An operator completes a step by hand, the sanctioned form of what `temporal activity complete`
does: the order's ship is refused at the carrier, the parcel goes by courier, and `sas complete`
records the courier's shipment as the step's result. The Scheduler checks it against the step's
result model, audits it and goes on; `--dry-run` changes nothing; a result that is not one, or a
step that waits for nothing, is refused with the reason."""

from __future__ import annotations

import json

from sas.state_store.queries import audit_for
from sas.task_models import TaskState, TaskStatus
from tests.cli.test_cli import sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

COURIER = json.dumps({"shipment_id": "shp_courier_1"})


async def ship_failed(stack: Stack, task_id: str) -> TaskStatus:
    handle = stack.client.get_workflow_handle(task_id)
    return await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: s.state == TaskState.FAILED,
        what="ship refused and waiting for a decision",
    )


async def test_a_refused_step_completed_by_hand_lets_the_task_go_on_with_its_result(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("by-hand")
    await stack.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=task_id
    )
    handle = await stack.submit(task_id)
    await ship_failed(stack, task_id)

    # A dry run: the Scheduler's checks, nothing recorded, nothing changed.
    dry = await sas(
        stack, "complete", task_id, "--step", "ship", "--result", COURIER, "--reason", "sent by courier", "--dry-run"
    )
    assert dry.returncode == 0, dry.stderr
    assert "would complete step ship by hand" in dry.stdout
    assert (await ship_failed(stack, task_id)).steps[-1].state == "Failed"

    # Not the step's result model: refused, naming the field.
    wrong = await sas(stack, "complete", task_id, "--step", "ship", "--result", '{"id": 1}', "--reason", "oops")
    assert wrong.returncode != 0 and "not a ShipResult" in wrong.stderr and "shipment_id" in wrong.stderr, wrong.stderr
    # The reserve waits for nothing: refused with the reason.
    idle = await sas(stack, "complete", task_id, "--step", "reserve", "--result", "{}", "--reason", "oops")
    assert idle.returncode != 0 and "step reserve is Processed" in idle.stderr, idle.stderr

    done = await sas(
        stack,
        "complete",
        task_id,
        "--step",
        "ship",
        "--result",
        COURIER,
        "--by",
        "carol",
        "--reason",
        "sent by courier",
    )
    assert done.returncode == 0, done.stderr
    result = await handle.result()
    assert result.state == TaskState.PROCESSED
    ship = next(s for s in result.steps if s.name == "ship")
    assert ship.state == "Processed" and ship.result == {"shipment_id": "shp_courier_1"}
    async with stack.sessions() as session:
        entries = [a for a in await audit_for(session, task_id) if a.action == "complete by hand"]
    [entry] = entries
    assert entry.actor == "carol" and entry.reason == "sent by courier" and "shp_courier_1" in entry.changed
    record = await stack.record(task_id)
    assert record is not None and record.task.state == "Processed"
    row = next(s for s in record.steps if s.name == "ship")
    assert row.state == "Processed" and row.result == {"shipment_id": "shp_courier_1"}
    # Nothing was shipped by the carrier: the courier did it.
    assert [e["action"] for e in await stack.ledger(task_id) if e["service"] == "shipping"] == []
