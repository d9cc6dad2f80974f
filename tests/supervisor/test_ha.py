"""One Supervisor, highly available, never acting twice:
two Supervisor workers at once, two Supervisor workflows over the same store, and a
Supervisor worker stopped abruptly mid-run and replaced. Real Temporal dev server,
real remote services, SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import operator
from functools import partial

import pytest

from sas.task_models import OperatorRequest, StepStatus, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig
from tests.supervisor.outcomes import check_batch, submit_batch

MIX = {"ok": 1, "retry": 2, "spent": 2, "permanent": 2}


async def test_two_supervisor_workers_one_workflow_act_once(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig()
    workflow_id = rig.settings.supervisor.workflow_id
    # Both workers poll the Supervisor queue; Temporal runs one Supervisor workflow of that id.
    await rig.start_supervisor("sup-1", workflow_id)
    await rig.start_supervisor("sup-2", workflow_id)
    batch = await submit_batch(rig, "ha1", MIX)
    rows = await check_batch(batch)
    assert {d.decided_by for d in rows} <= {"sup-1", "sup-2"}


async def test_two_supervisor_workflows_over_one_store_act_once(make_rig) -> None:  # type: ignore[no-untyped-def]
    """Not how sas is deployed (one workflow id), but the worst case for the compare-and-set:
    two Supervisors scan the same rows and race to claim every decision and flush the outbox."""
    rig: Rig = await make_rig()
    await rig.start_supervisor("sup-a", rig.settings.supervisor.workflow_id)
    await rig.start_supervisor("sup-b", fresh_id("second-supervisor"))
    assert len(set(rig.supervisor_ids)) == 2
    batch = await submit_batch(rig, "ha2", MIX)
    await check_batch(batch)


async def test_supervisor_worker_stopped_mid_run_loses_and_repeats_nothing(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig()
    workflow_id = rig.settings.supervisor.workflow_id
    names = (f"sup-{n}" for n in itertools.count())
    current = next(names)
    await rig.start_supervisor(current, workflow_id)
    batch = await submit_batch(rig, "kill", {"ok": 1, "retry": 2, "spent": 3, "permanent": 2})

    async def decided() -> int:
        return sum([len(await rig.decisions(t)) for t in batch.expected])

    async def waiting() -> tuple[int, int]:
        """(tasks with a step Failed, waiting for a decision; tasks not finished yet)."""
        failed = running = 0
        for task_id in batch.expected:
            record = await rig.record(task_id)
            failed += record is not None and any(s.state == "Failed" for s in record.steps)
            running += record is None or record.task.state not in ("Processed", "Compensated")
        return failed, running

    # Stop the worker as soon as a decision lands (mid-sweep: its activity is cancelled
    # wherever it is), let failures pile up with nobody supervising, then replace it.
    # Twice over, then let the last one finish the job.
    seen = 0
    for _ in range(2):
        seen = await wait_until(decided, partial(operator.lt, seen), timeout=60, what="a new decision")
        await rig.stop_supervisor(current)
        await wait_until(waiting, lambda n: n[0] > 0 or n[1] == 0, timeout=60, what="a step waiting for a decision")
        current = next(names)
        await rig.start_supervisor(current, workflow_id)
    await check_batch(batch, timeout=120)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_a_decision_signalled_twice_reruns_the_step_once(make_rig) -> None:  # type: ignore[no-untyped-def]
    """Two Supervisors flushing the same outbox row (or a sweep killed between signalling and
    marking the row sent) send one decision twice. docs/how-it-works.md: the decision carries
    the FailureCount it was made at, so the copy is refused and the step re-runs once. Here both
    copies reach the Scheduler in one workflow task, as they do when they are sent close together."""
    rig: Rig = await make_rig()  # no Supervisor: only the decision sent below acts
    task_id = fresh_id("dup-signal")
    await rig.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=task_id)
    handle = await rig.submit(task_id)

    async def status() -> TaskStatus:
        return await handle.query("status", result_type=TaskStatus)

    def ship(s: TaskStatus) -> StepStatus:
        return next((x for x in s.steps if x.name == "ship"), StepStatus(name="ship", position=2))

    await wait_until(status, lambda s: ship(s).state == "Failed" and ship(s).runs == 1, timeout=60, what="ship Failed")
    await rig.stop_task_worker()
    decision = OperatorRequest(step="ship", failure_count=1, decision_id="1", by="supervisor", reason="retry 1 of 2")
    await handle.signal("retry", decision)
    await handle.signal("retry", decision)  # the same decision again
    await rig.start_task_worker()
    await wait_until(
        status,
        lambda s: ship(s).state == "Failed" and ship(s).runs >= 2,
        timeout=60,
        what="ship re-run once and Failed again",
    )
    # Stop the task; a stale copy of the decision would have re-run ship before this lands.
    await handle.signal("compensate", OperatorRequest(by="test", reason="test over"))
    result = await handle.result()
    ship_result = next(s for s in result.steps if s.name == "ship")
    events = (await status()).events
    assert (ship_result.runs, sum(" ship: retry by supervisor" in e for e in events)) == (2, 1), events
