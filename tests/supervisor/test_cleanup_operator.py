"""A clean-up runs the Scheduler's own undo engine: its undos run on their service's
queue, a failing one is retried by the Supervisor's ladder then parked, ``sas resubmit`` is
refused while the clean-up is unfinished, and ``sas retry`` reaches the parked undo. Real dev
server, real services and Supervisor, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
from collections import Counter

from temporalio.api.enums.v1 import EventType

from tests.cli.test_cli import sas
from tests.conftest import temporal_binary
from tests.helpers import fresh_id, wait_until
from tests.stack import FAST_STEP
from tests.supervisor.conftest import Rig


async def test_a_cleanup_undo_on_its_service_queue_is_parked_then_retried_with_sas_retry(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(retries=1, step=FAST_STEP, own_queues=True)
    await rig.start_supervisor("sup-cleanup-op", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("cl-op")
    await rig.add_fault(endpoint="shipping.ship", kind="hang", hang_s=30, match_order_id=task_id)
    refund_down = await rig.add_fault(
        endpoint="payment.refund", kind="permanent", status=422, error="refund_blocked", match_order_id=task_id
    )
    await rig.submit(task_id)
    await wait_until(lambda: rig.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship in flight")
    done = await asyncio.to_thread(
        subprocess.run,
        [
            temporal_binary(),
            "workflow",
            "terminate",
            "--workflow-id",
            task_id,
            "--reason",
            "by mistake",
            "--address",
            rig.settings.temporal.address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr

    await wait_until(
        lambda: rig.step_states(task_id), lambda s: s.get("charge") == "Error", timeout=90, what="the undo parked"
    )
    cleanup = rig.client.get_workflow_handle(f"cleanup-{task_id}")
    # Its line in the UI: the order type's own summary (its amount in its currency), not sas's.
    summary = await (await cleanup.describe()).static_summary()
    assert summary is not None and summary.startswith(f"clean-up of order {task_id} · "), summary
    assert " EUR · undo the attempted steps in reverse" in summary, summary
    history = await cleanup.fetch_history()
    queues = {
        e.activity_task_scheduled_event_attributes.activity_type.name: e.activity_task_scheduled_event_attributes.task_queue.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    base = rig.settings.temporal.task_queue
    assert queues["payment.refund"] == f"{base}.payment" and queues["shipping.cancel"] == f"{base}.shipping"

    refused = await sas(rig, "resubmit", task_id, "--reason", "try again")
    assert refused.returncode != 0 and "clean-up" in refused.stderr, refused.stderr

    await rig.remove_fault(refund_down)
    retried = await sas(rig, "retry", task_id, "--reason", "refunds unblocked")
    assert retried.returncode == 0, retried.stderr
    await wait_until(lambda: rig.task_state(task_id), lambda s: s == "Compensated", timeout=60, what="clean-up done")
    ledger = Counter(e["action"] for e in await rig.ledger(task_id))
    assert ledger["refund"] == 1 and ledger["release"] == 1 and ledger["charge"] == 1
    assert await rig.step_states(task_id) == {"reserve": "Compensated", "charge": "Compensated", "ship": "Compensated"}
