"""Each detection, a to e, end to end: real Temporal dev server, real remote services,
a real Supervisor, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from sas.cli.show_cmd import task_history
from sas.task_models import TaskState
from tests.conftest import temporal_binary
from tests.helpers import fresh_id, wait_until
from tests.stack import FAST_STEP
from tests.supervisor.conftest import Rig


def actions(ledger: list[dict]) -> Counter[str]:
    return Counter(e["action"] for e in ledger)


async def test_a_failed_step_climbs_the_ladder_and_shows_in_history(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig()
    await rig.start_supervisor("sup-a", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("a-failed")
    # Both quick attempts fail (Failed); the Supervisor's retry succeeds.
    await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    result = await (await rig.submit(task_id)).result()
    assert result.state == TaskState.PROCESSED
    # A "wait" (retry backoff) shows up only if a sweep came before the delay ended.
    decisions = [(d.kind, d.failure_count, d.observed_state) for d in await rig.decisions(task_id) if d.kind != "wait"]
    assert decisions == [("retry", 1, "Failed")]
    assert actions(await rig.ledger(task_id))["ship"] == 1
    async with rig.sessions() as session:
        shown = await task_history(session, task_id)
    assert shown is not None and [d["kind"] for d in shown["decisions"] if d["kind"] != "wait"] == ["retry"]
    assert all(d["decided_by"] == "sup-a" and d["reason"] for d in shown["decisions"])


async def test_a_failure_wakes_the_supervisor_from_its_record_not_from_the_task(make_rig) -> None:  # type: ignore[no-untyped-def]
    """A Supervisor asleep for a minute is woken by the failure's record, and retries the step
    well before its next tick; the task's own history has no signal to it (a signal's answer would
    be an event, and a workflow task that made the task look busy to the Supervisor)."""
    rig: Rig = await make_rig(interval_s=60.0, max_interval_s=60.0)
    await rig.start_supervisor("sup-wake", rig.settings.supervisor.workflow_id)
    supervisor = rig.client.get_workflow_handle(rig.settings.supervisor.workflow_id)
    await wait_until(lambda: supervisor.query("sweeps", result_type=int), lambda n: n >= 1, what="a first sweep")
    task_id = fresh_id("a-wake")
    await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    handle = await rig.submit(task_id)
    # Within the minute the Supervisor would otherwise sleep: only the wake can bring it sooner.
    result = await asyncio.wait_for(handle.result(), timeout=45)
    assert result.state == TaskState.PROCESSED
    assert [d.kind for d in await rig.decisions(task_id) if d.kind != "wait"] == ["retry"]
    signalled = [
        event
        async for event in handle.fetch_history_events()
        if event.HasField("signal_external_workflow_execution_initiated_event_attributes")
    ]
    assert signalled == []


async def test_b_c_dead_worker_waits_for_a_worker_not_overdue_then_recovery(make_rig) -> None:  # type: ignore[no-untyped-def]
    """Workers down mid-step (a deploy gap): the step waits for a worker - complete-by counts only
    time an attempt runs - so nothing is counted or undone; the no-worker queue is one alert."""
    # A complete-by long enough that the worker is surely stopped within ship's first attempt (on
    # a loaded machine, 2 s could pass before the stop: the attempt timed out and was retried).
    step = FAST_STEP.model_copy(update={"complete_by_s": 8.0})
    # Each service on its own queue: the ship's retry waits in shipping's, an incident of its own.
    rig: Rig = await make_rig(retries=1, poller_stale_s=2.0, step=step, own_queues=True)
    await rig.start_supervisor("sup-bc", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("bc-dead")
    await rig.add_fault(endpoint="shipping.ship", kind="hang", hang_s=30, times=1, match_order_id=task_id)
    handle = await rig.submit(task_id)
    await wait_until(lambda: rig.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship in flight")
    await rig.stop_task_worker()  # the agent's process dies mid-step

    async def unpolled_alerts() -> list[Any]:
        from sas.state_store.alerts import list_alerts

        async with rig.sessions() as session:
            return [
                a
                for a in await list_alerts(session)
                if a.kind == "queue_unpolled" and rig.settings.temporal.task_queue in a.message
            ]

    # One incident (one outage, one alert) naming both queues nobody polls: the workflow
    # queue (no workflow nor activity poller), and shipping's own queue, where the ship's retry
    # waits (activity pollers only: no workflows run there).
    queue = rig.settings.temporal.task_queue
    [unpolled] = await wait_until(
        unpolled_alerts,
        lambda a: len(a) == 1 and f"queue {queue}.shipping;" in a[0].message,
        timeout=60,
        what="one unpolled-queue alert naming both queues",
    )
    assert unpolled.incident_key == "queue_unpolled" and unpolled.message.startswith("2 task queue(s)")
    assert re.search(
        rf"no worker \(workflows nor Agents\) is polling queue {queue}; \d+ steps waiting", unpolled.message
    )
    assert re.search(rf"no activity worker is polling queue {queue}.shipping; 1 shipping calls", unpolled.message)
    # Well past the step's complete-by and the one-retry ladder: still nothing counted, decided or alerted.
    record = await rig.record(task_id)
    assert record is not None
    deadline = max(s.complete_by for s in record.steps if s.complete_by is not None)
    await sweeps_after(rig, deadline + timedelta(seconds=3 * record.steps[-1].complete_by_s), sweeps=3)
    assert [d.kind for d in await rig.decisions(task_id) if d.kind != "wait"] == []
    assert {s.name: s.failure_count for s in (await rig.record(task_id)).steps}["ship"] == 0  # type: ignore[union-attr]
    assert [(a.kind, a.message) for a in await rig.alerts(task_id)] == []
    await rig.start_task_worker()  # pollers return
    assert (await handle.result()).state == TaskState.PROCESSED

    async def status() -> list[str]:
        from sas.state_store.alerts import list_alerts

        async with rig.sessions() as session:
            every = await list_alerts(session, limit=1000)
        return [a.status for a in every if a.kind == "queue_unpolled"]

    await wait_until(status, lambda s: s == ["resolved"], timeout=30, what="the queue alert resolved by itself")


async def test_d_workflow_terminated_mid_saga_is_cleaned_up_from_the_mirror(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(step=FAST_STEP)
    await rig.start_supervisor("sup-d", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("d-term")
    await rig.add_fault(endpoint="shipping.ship", kind="hang", hang_s=30, match_order_id=task_id)
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
            "oops, from the UI",
            "--address",
            rig.settings.temporal.address,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr

    await wait_until(lambda: rig.task_state(task_id), lambda s: s == "Compensated", timeout=60, what="clean-up done")
    ledger = actions(await rig.ledger(task_id))
    assert ledger["reserve"] == 1 and ledger["charge"] == 1 and ledger["ship"] == 0
    assert ledger["release"] == 1 and ledger["refund"] == 1
    assert await rig.step_states(task_id) == {"reserve": "Compensated", "charge": "Compensated", "ship": "Compensated"}
    decisions = [(d.kind, d.step) for d in await rig.decisions(task_id) if d.kind == "cleanup"]
    assert decisions == [("cleanup", "-")]
    alerts = [a for a in await rig.alerts(task_id) if a.kind == "workflow_closed"]
    assert len(alerts) == 1 and alerts[0].severity == "critical" and "terminated" in alerts[0].message
    cleanup = await rig.client.get_workflow_handle(f"cleanup-{task_id}").result()
    assert cleanup["charge"] == "Compensated"


async def test_e_compensation_that_keeps_failing_is_retried_then_parked(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(retries=2)
    await rig.start_supervisor("sup-e", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("e-undo")
    await rig.add_fault(endpoint="shipping.ship", kind="permanent", status=422, error="no", match_order_id=task_id)
    await rig.add_fault(endpoint="payment.refund", kind="transient", match_order_id=task_id)
    handle = await rig.submit(task_id)
    await wait_until(
        lambda: rig.step_states(task_id),
        lambda s: s.get("charge") == "Error",
        timeout=60,
        what="the failing undo parked",
    )
    undo = [(d.kind, d.observed_state) for d in await rig.decisions(task_id) if d.step == "charge" and d.kind != "wait"]
    assert undo == [("retry", "CompensationFailed"), ("retry", "CompensationFailed"), ("park", "CompensationFailed")]
    failing = [a for a in await rig.alerts(task_id) if a.kind == "compensation_failing"]
    assert len(failing) == 1 and failing[0].severity == "critical" and failing[0].step == "charge"
    assert "503" in (failing[0].last_error or "")
    assert await rig.task_state(task_id) == "Error"
    await handle.terminate("test over")


async def sweeps_after(rig: Rig, when: datetime, sweeps: int) -> None:
    """Wait until ``when`` has passed and the Supervisor has swept ``sweeps`` times since."""

    async def now() -> datetime:
        return datetime.now(UTC)

    await wait_until(now, lambda t: t >= when, timeout=120, what=f"the time {when.isoformat()}")
    handle = rig.client.get_workflow_handle(rig.settings.supervisor.workflow_id)
    start = await handle.query("sweeps", result_type=int)
    await wait_until(
        lambda: handle.query("sweeps", result_type=int), lambda n: n >= start + sweeps, what=f"{sweeps} sweeps"
    )
