"""Temporal's own controls used on a sas task, not sas's: the task shows in sas's views with
what to do. A step paused with `temporal activity pause` (or the UI) is listed as parked, with
an alert naming who paused it and why, and `sas retry` resumes it; a result written with
`temporal activity complete` is flagged as not the Agent's."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import PauseActivityRequest
from temporalio.service import RPCError

from sas.state_store.queries import audit_for
from tests.cli.test_cli import as_json, sas
from tests.e2e.test_mirror_follows_temporal import quick_stack  # noqa: F401 - a fixture
from tests.e2e.test_temporal_cli import temporal_cli
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack


async def charge_activity(stack: Stack, task_id: str) -> Any:
    """The task's pending payment.charge activity, as Temporal describes it; None if there is none."""
    described = await stack.client.get_workflow_handle(task_id).describe()
    pending = described.raw_description.pending_activities
    return next((a for a in pending if a.activity_type.name == "payment.charge"), None)


async def test_a_step_paused_outside_sas_is_listed_as_parked_with_an_alert(stack: Stack) -> None:
    task_id = fresh_id("raw-pause")
    fault = await stack.add_fault(endpoint="payment.charge", kind="hang", hang_s=60, match_order_id=task_id)
    handle = await stack.submit(task_id)

    running = await wait_until(lambda: charge_activity(stack, task_id), lambda a: a is not None, what="charge running")
    # What `temporal activity pause` sends: the raw API, with the caller's own identity.
    await stack.client.workflow_service.pause_activity(
        PauseActivityRequest(
            namespace=stack.client.namespace,
            execution=WorkflowExecution(workflow_id=task_id),
            identity="mallory@laptop",
            id=running.activity_id,
            reason="looked stuck",
        )
    )

    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Error", timeout=60, what="listed as parked")
    assert (await stack.step_states(task_id))["charge"] == "Error"
    [alert] = [a for a in await stack.alerts(task_id) if a.kind == "paused_outside_sas"]
    assert "paused in Temporal by mallory@laptop (looked stuck), not with `sas park`" in alert.message
    assert f"`sas retry {task_id}` unpauses it" in alert.suggested_action
    listed = as_json(await sas(stack, "list", "--state", "error", "--json"))
    assert task_id in [t["task_id"] for t in listed]

    await stack.remove_fault(fault)
    resumed = await sas(stack, "retry", task_id, "--by", "carol", "--reason", "not stuck")
    assert resumed.returncode == 0, resumed.stderr
    assert (await handle.result()).state == "Processed"


async def test_a_result_completed_from_outside_drives_nothing_and_the_lookup_decides(quick_stack: Stack) -> None:  # noqa: F811
    """`temporal activity complete` ends a hung charge with a result nobody's service gave. It
    carries no Agent's seal, so the Scheduler does not take it: nothing ships, the charge fails
    for good and the order is undone, its refund's lookup deciding (the bank never charged, so
    nothing is refunded); an audit entry and a critical alert name the activity and the claim."""
    stack = quick_stack
    task_id = fresh_id("forged-result")
    await stack.add_fault(endpoint="payment.charge", kind="hang", hang_s=60, match_order_id=task_id)
    handle = await stack.submit(task_id)

    running = await wait_until(lambda: charge_activity(stack, task_id), lambda a: a is not None, what="charge running")
    forged = {"data": {"charge_id": "ch_forged", "amount_cents": 1299, "currency": "EUR"}}
    done = await temporal_cli(
        stack.settings.temporal.address,
        *("activity", "complete", "--workflow-id", task_id, "--activity-id", running.activity_id),
        *("--result", json.dumps(forged)),
    )
    assert done.returncode == 0, done.stderr
    result = await handle.result()
    assert result.state == "Compensated"
    charge = next(s for s in result.steps if s.name == "charge")
    assert charge.result is None  # the claim was never taken as the charge's result
    assert charge.error_type == "ForeignResult" and "ch_forged" in (charge.last_error or "")

    async def flagged() -> list[Any]:
        return [a for a in await stack.alerts(task_id) if a.kind == "foreign_result"]

    [alert] = await wait_until(flagged, bool, timeout=60, what="the foreign result alerted")
    assert alert.severity == "critical"
    assert "payment.charge completed with a result no Agent of sas sealed" in alert.message
    assert "ch_forged" in alert.message
    async with stack.sessions() as session:
        audit = await audit_for(session, task_id)
    [refused] = [a for a in audit if a.action == "refuse result"]
    assert refused.step == "charge" and "ch_forged" in refused.changed
    # Nothing shipped, nothing charged, nothing refunded: the lookup said the bank did nothing.
    ledger = [(e["service"], e["action"]) for e in await stack.ledger(task_id)]
    assert not [e for e in ledger if e[0] in ("payment", "shipping")], ledger


async def pending_refund(stack: Stack, cleanup_id: str) -> Any:
    """The clean-up's pending payment.refund activity, once Temporal runs it; None before."""
    try:
        described = await stack.client.get_workflow_handle(cleanup_id).describe()
    except RPCError:
        return None  # not started yet
    pending = described.raw_description.pending_activities
    return next((a for a in pending if a.activity_type.name == "payment.refund"), None)


async def test_a_clean_up_s_undo_completed_from_outside_is_not_taken_and_the_refund_is_made(
    quick_stack: Stack,  # noqa: F811
) -> None:
    """An order terminated after its charge is cleaned up; its refund, hung at the bank, is
    completed from outside with a result of the caller's own. The clean-up does not take it as
    the refund: it is audited and alerted, the undo is sent again under its key, and the bank's
    ledger shows the refund really made."""
    stack = quick_stack
    task_id = fresh_id("forged-cleanup")
    await stack.add_fault(endpoint="shipping.ship", kind="hang", hang_s=30, match_order_id=task_id)
    refund_hang = await stack.add_fault(
        endpoint="payment.refund", kind="hang", hang_s=60, times=1, match_order_id=task_id
    )
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship in flight")
    await handle.terminate("closed from outside, after its charge")

    running = await wait_until(
        lambda: pending_refund(stack, f"cleanup-{task_id}"), lambda a: a is not None, timeout=90, what="refund running"
    )
    forged = {"data": {"refunded": True}}
    done = await temporal_cli(
        stack.settings.temporal.address,
        *("activity", "complete", "--workflow-id", f"cleanup-{task_id}", "--activity-id", running.activity_id),
        *("--result", json.dumps(forged)),
    )
    assert done.returncode == 0, done.stderr
    await stack.remove_fault(refund_hang)  # the hung call ends, having done nothing

    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Compensated", timeout=120, what="undone")
    effects = [(e["service"], e["action"]) for e in await stack.ledger(task_id)]
    assert ("payment", "charge") in effects and ("payment", "refund") in effects, effects
    async with stack.sessions() as session:
        refused = [a for a in await audit_for(session, task_id) if a.action == "refuse result"]
    assert [a.step for a in refused] == ["charge"] and '"refunded": true' in refused[0].changed
    [alert] = [a for a in await stack.alerts(task_id) if a.kind == "foreign_result"]
    assert (
        alert.severity == "critical"
        and "payment.refund completed with a result no Agent of sas sealed" in alert.message
    )
