"""Child tasks end to end: real dev server, the real remote services and their ledger, a real
Supervisor, on SQLite and PostgreSQL. A child refused for good undoes itself and its parent
exactly; a parent refused after its child completed undoes the child through the child's
clean-up; a parent compensated while its child runs has the child undo itself; a clean-up that
names a parent but was not started by it undoes nothing; a parent terminated after its child
completed is undone with the child by its clean-up; a worker stopped mid-child loses
nothing (tests/examples/test_child_task_doc.py kills a worker process)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from sas.reconciliation.repairs import reconcile_task
from sas.task_models import TaskState
from tests.cli.test_cli import sas
from tests.e2e.children import GiftOrderWorkflow
from tests.helpers import fresh_id, wait_until
from tests.stack import order
from tests.supervisor.conftest import Rig

KINDS: list[type] = [GiftOrderWorkflow]
HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def actions(ledger: list[dict[str, Any]]) -> list[str]:
    return [e["action"] for e in ledger]


async def _show(rig: Rig, task_id: str) -> dict[str, Any]:
    shown = await sas(rig, "show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    data: dict[str, Any] = json.loads(shown.stdout)
    return data


async def test_a_child_refused_for_good_undoes_itself_then_its_parent(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    await rig.start_supervisor("sup-child-refused", rig.settings.supervisor.workflow_id)
    parent = fresh_id("gift-refused")
    child = f"{parent}:gift"
    await rig.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=child
    )
    result = await (await rig.submit(parent, order(), workflow="GiftOrderWorkflow")).result()

    assert result.state == TaskState.COMPENSATED
    # The child undid what it did, latest first, and nothing else; the parent its own reserve.
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "refund", "release"]
    assert actions(await rig.ledger(parent)) == ["reserve", "release"]
    assert await rig.task_state(child) == "Compensated"
    assert await rig.step_states(parent) == {"reserve": "Compensated", "gift": "Compensated", "ship": "Skipped"}
    gift = next(s for s in result.steps if s.name == "gift")
    assert gift.error_type == "ChildCompensated" and gift.permanent
    # sas show links them both ways.
    assert (await _show(rig, child))["parent"] == {"task_id": parent, "step": "gift"}
    children = (await _show(rig, parent))["children"]
    assert children == [{"task_id": child, "step": "gift", "task_type": "order", "state": "Compensated"}]
    said = await sas(rig, "show", parent)
    assert f"child task {child} (order) of step gift" in said.stdout.replace("\n", " ")
    said = await sas(rig, "show", child)
    assert f"child of {parent} (its step gift)" in said.stdout.replace("\n", " ")


async def test_a_parent_refused_after_its_child_completed_undoes_the_child(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    await rig.start_supervisor("sup-child-undone", rig.settings.supervisor.workflow_id)
    parent = fresh_id("gift-undone")
    child = f"{parent}:gift"
    await rig.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=parent
    )
    result = await (await rig.submit(parent, order(), workflow="GiftOrderWorkflow")).result()

    assert result.state == TaskState.COMPENSATED
    # The child completed, then was undone as a whole by its clean-up, latest first.
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "ship", "cancel", "refund", "release"]
    assert actions(await rig.ledger(parent)) == ["reserve", "release"]
    assert await rig.step_states(child) == {"reserve": "Compensated", "charge": "Compensated", "ship": "Compensated"}
    assert await rig.task_state(child) == "Compensated"
    # Reconciling the child with Temporal keeps it so: its workflow answered Processed, but it was
    # undone after, by its clean-up, and a task row never goes back from Compensated.
    reconciled = await reconcile_task(rig.sessions, rig.client, child)
    assert reconciled is not None and reconciled.repairs == []
    assert await rig.task_state(child) == "Compensated"
    assert await rig.step_states(parent) == {"reserve": "Compensated", "gift": "Compensated", "ship": "Compensated"}
    # The parent's undo of its child is in its audit log, and the clean-up was its own child.
    undo = [a for a in (await _show(rig, parent))["operator_actions"] if a["action"] == "undo child"]
    assert len(undo) == 1 and child in undo[0]["changed"]
    described = await rig.client.get_workflow_handle(f"cleanup-{child}").describe()
    assert described.parent_id == parent
    assert Counter(actions(await rig.ledger(child))).most_common(1)[0][1] == 1  # one effect per key
    # Nothing about the child looked wrong to the Supervisor: it was undone by the authorised path.
    assert await rig.alerts(child) == []


async def test_a_parent_terminated_after_its_child_completed_is_undone_with_the_child(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    parent = fresh_id("gift-killed")
    child = f"{parent}:gift"
    # The parent's own ship is slow, so the terminate finds the child done and the parent mid-ship.
    await rig.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=4_000, match_order_id=parent)
    handle = await rig.submit(parent, order(), workflow="GiftOrderWorkflow")
    await wait_until(
        lambda: rig.step_states(parent), lambda s: s.get("ship") == "Processing", what="the parent mid-ship"
    )
    assert await rig.task_state(child) == "Processed"
    await handle.terminate("an operator's mistake")
    # Before the Supervisor has seen it, an operator's compensate is told whose it is to undo.
    said = await sas(rig, "compensate", parent, "--by", "ada", "--reason", "terminated by mistake")
    assert said.returncode == 1
    assert "closed from outside sas (terminated)" in said.stderr.replace("\n", " ")
    assert f"cleanup-{parent} undoes what it did" in said.stderr.replace("\n", " ")

    await rig.start_supervisor("sup-child-killed", rig.settings.supervisor.workflow_id)
    # The Supervisor finds the parent closed from outside and starts its clean-up.
    await wait_until(lambda: rig.task_state(parent), lambda s: s == "Compensated", timeout=120, what="parent undone")

    # The parent's clean-up undid the child as a whole through the child's own clean-up, which it
    # started: every effect of both undone exactly once, latest first.
    await wait_until(lambda: rig.task_state(child), lambda s: s == "Compensated", timeout=60, what="child undone")
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "ship", "cancel", "refund", "release"]
    # The parent's ship, cut off at its service by the terminate, either never landed (its lookup
    # voided the key) or landed and was cancelled: nothing of the parent is left either way.
    assert actions(await rig.ledger(parent)) in (["reserve", "release"], ["reserve", "ship", "cancel", "release"])
    described = await rig.client.get_workflow_handle(f"cleanup-{child}").describe()
    assert described.parent_id == f"cleanup-{parent}"
    assert [a.kind for a in await rig.alerts(child)] == []


async def test_a_clean_up_naming_a_parent_it_was_not_started_by_is_refused(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    parent = fresh_id("gift-done")
    child = f"{parent}:gift"
    result = await (await rig.submit(parent, order(), workflow="GiftOrderWorkflow")).result()
    assert result.state == TaskState.PROCESSED
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "ship"]
    assert actions(await rig.ledger(parent)) == ["reserve", "ship"]

    # Anyone with access to the namespace could start this: it names the parent and its step.
    forged = {
        "task_id": child,
        "task_type": "",
        "payload": {},
        "steps": [],
        "parent_task_id": parent,
        "parent_step": "gift",
    }
    handle = await rig.client.start_workflow(
        "CleanupWorkflow", forged, id=f"cleanup-{child}", task_queue=rig.settings.temporal.task_queue
    )
    with pytest.raises(WorkflowFailureError) as refused:
        await handle.result()
    assert "started by no workflow" in str(refused.value.cause)
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "ship"]  # nothing undone
    assert await rig.task_state(child) == "Processed"
    alerts = await rig.alerts(child)
    assert [a.kind for a in alerts] == ["cleanup_refused"] and alerts[0].severity == "critical"


async def test_a_parent_compensated_mid_child_has_its_running_child_undo_itself(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    parent = fresh_id("gift-cancel")
    child = f"{parent}:gift"
    # Slow enough that the compensate, sent as soon as the charge is under way, finds it there.
    await rig.add_fault(endpoint="payment.charge", kind="latency", latency_ms=6_000, match_order_id=child)
    handle = await rig.submit(parent, order(), workflow="GiftOrderWorkflow")
    await wait_until(
        lambda: rig.step_states(child), lambda s: s.get("charge") == "Processing", what="the child mid-charge"
    )
    await handle.execute_update("request_compensate", {"by": "ada", "reason": "customer cancelled"})
    result = await handle.result()

    assert result.state == TaskState.COMPENSATED
    # The child was cancelled: its charge, already at the service, is refunded, its stock released.
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "refund", "release"]
    assert actions(await rig.ledger(parent)) == ["reserve", "release"]
    assert await rig.task_state(child) == "Compensated"
    gift = next(s for s in result.steps if s.name == "gift")
    assert gift.state == "Compensated"


async def test_a_child_survives_its_worker_stopping_mid_child(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=KINDS)
    await rig.start_supervisor("sup-child-crash", rig.settings.supervisor.workflow_id)
    parent = fresh_id("gift-crash")
    child = f"{parent}:gift"
    await rig.add_fault(endpoint="payment.charge", kind="latency", latency_ms=1_500, match_order_id=child)
    handle = await rig.submit(parent, order(), workflow="GiftOrderWorkflow")
    await wait_until(
        lambda: rig.step_states(child), lambda s: s.get("charge") == "Processing", what="the child mid-charge"
    )
    assert (await rig.step_states(parent))["gift"] == "Waiting"
    await rig.stop_task_worker()
    await rig.start_task_worker()
    result = await handle.result()

    assert result.state == TaskState.PROCESSED
    assert actions(await rig.ledger(child)) == ["reserve", "charge", "ship"]
    assert actions(await rig.ledger(parent)) == ["reserve", "ship"]
    await wait_until(lambda: rig.task_state(child), lambda s: s == "Processed", timeout=60, what="the child's row")


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_record_histories_of_child_tasks(make_rig) -> None:  # type: ignore[no-untyped-def]
    """Histories for tests/replay: a parent whose child completes, one whose child is refused for
    good, one undone after its child completed, and that child's clean-up."""
    rig: Rig = await make_rig(extra_workflows=KINDS)
    await rig.start_supervisor("sup-child-record", rig.settings.supervisor.workflow_id)
    completed, refused, undone = fresh_id("gift"), fresh_id("gift-refused"), fresh_id("gift-undone")
    await rig.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=f"{refused}:gift"
    )
    await rig.add_fault(
        endpoint="shipping.ship", kind="permanent", status=422, error="no_such_street", match_order_id=undone
    )
    handles = {
        name: await rig.submit(task_id, order(), workflow="GiftOrderWorkflow")
        for name, task_id in (
            ("gift_completed", completed),
            ("gift_child_refused", refused),
            ("gift_child_undone", undone),
        )
    }
    handles["cleanup_of_child"] = rig.client.get_workflow_handle(f"cleanup-{undone}:gift")
    for name, handle in handles.items():
        if name != "cleanup_of_child":
            await handle.result()
    for name, handle in handles.items():
        history = await handle.fetch_history()
        (HISTORIES / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")


async def test_a_child_s_step_completed_from_outside_drives_neither_child_nor_parent(make_rig) -> None:  # type: ignore[no-untyped-def]
    """The child order's charge, hung at the bank, is completed from outside with a result of the
    caller's own. The child does not take it: its charge fails for good, the child undoes itself
    (the refund's lookup says the bank never charged, so nothing is refunded), and its parent,
    whose child was undone, undoes itself too. Nothing ships."""
    from tests.e2e.test_temporal_cli import temporal_cli
    from tests.trust.test_outside_controls import charge_activity

    rig: Rig = await make_rig(extra_workflows=KINDS)
    await rig.start_supervisor("sup-child-forged", rig.settings.supervisor.workflow_id)
    parent = fresh_id("gift-forged")
    child = f"{parent}:gift"
    hang = await rig.add_fault(endpoint="payment.charge", kind="hang", hang_s=60, match_order_id=child)
    handle = await rig.submit(parent, order(), workflow="GiftOrderWorkflow")

    async def child_charging() -> Any:
        try:
            return await charge_activity(rig, child)
        except RPCError:
            return None  # the child is not started yet

    running = await wait_until(child_charging, lambda a: a is not None, what="child charging")
    forged = {"data": {"charge_id": "ch_forged", "amount_cents": 1299, "currency": "EUR"}}
    done = await temporal_cli(
        rig.settings.temporal.address,
        *("activity", "complete", "--workflow-id", child, "--activity-id", running.activity_id),
        *("--result", json.dumps(forged)),
    )
    assert done.returncode == 0, done.stderr
    await rig.remove_fault(hang)  # the hung call ends, having done nothing
    result = await handle.result()

    assert result.state == TaskState.COMPENSATED
    assert await rig.task_state(child) == "Compensated"
    assert actions(await rig.ledger(child)) == ["reserve", "release"]
    assert actions(await rig.ledger(parent)) == ["reserve", "release"]
    [alert] = [a for a in await rig.alerts(child) if a.kind == "foreign_result"]
    assert "ch_forged" in alert.message
