"""No single task stops the Supervisor's sweep for the others. Each test keeps one poisoned task
in front of a real Supervisor - its status query fails (F4), its answer is too large for a message
(F15), its type is registered on no worker any more (F17), its decision cannot be sent as it is
(F3) - and shows that another task that fails meanwhile is still decided and recovers, and that
the poisoned task gets one alert naming it and the cause."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from sas.state_store import tables
from sas.task_models import TaskState
from sas.task_models.status import MAX_FAILURE_COUNT
from tests.helpers import fresh_id, wait_until
from tests.stack import order
from tests.supervisor.conftest import Rig
from tests.supervisor.poison_kinds import FailingStatusOrderWorkflow, HugeStatusOrderWorkflow, RetiredOrderWorkflow

POISONS: list[type] = [FailingStatusOrderWorkflow, HugeStatusOrderWorkflow, RetiredOrderWorkflow]
# A deadline a loaded CI machine meets, not the bound itself: how soon a decision comes under load
# is measured by bench/supervisor_load.py (docs/benchmarks.md). A Supervisor stopped by the poison
# never decides at all.
DECIDED_WITHIN_S = 60.0


async def a_failing_order_is_decided(rig: Rig) -> None:
    """An ordinary order whose shipment fails twice: the Supervisor's retry brings it through."""
    task_id = fresh_id("healthy")
    await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    handle = await rig.submit(task_id)
    result = await asyncio.wait_for(handle.result(), DECIDED_WITHIN_S)
    assert result.state == TaskState.PROCESSED
    assert [(d.kind, d.failure_count) for d in await rig.decisions(task_id) if d.kind != "wait"] == [("retry", 1)]


async def isolation_alerts(rig: Rig, task_id: str) -> list[Any]:
    return await wait_until(
        lambda: rig.alerts(task_id),
        lambda found: any(a.kind == "task_check_failed" for a in found),
        timeout=DECIDED_WITHIN_S,
        what=f"the alert for {task_id}",
    )


async def quiet(rig: Rig, task_id: str) -> None:
    """Until the task is one the orphan check looks at: open, and not updated for orphan_after_s."""

    async def idle_s() -> float:
        record = await rig.record(task_id)
        if record is None:
            return 0.0
        updated = record.task.updated_at
        updated = updated if updated.tzinfo else updated.replace(tzinfo=UTC)
        return (datetime.now(UTC) - updated).total_seconds()

    await wait_until(
        idle_s, lambda s: s > rig.settings.supervisor.orphan_after_s + 0.5, timeout=30, what="a quiet task"
    )


@pytest.mark.parametrize(
    ("workflow", "cause"),
    [
        ("FailingStatusOrderWorkflow", "status query failed: "),  # F4
        ("HugeStatusOrderWorkflow", "status query failed: its answer is too large for a message"),  # F15
    ],
    ids=["query-fails", "answer-too-large"],
)
async def test_a_task_whose_status_query_fails_does_not_stop_the_others(make_rig, workflow: str, cause: str) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(extra_workflows=POISONS)
    poison = fresh_id("poison")
    await rig.submit(poison, order(), workflow=workflow)
    await quiet(rig, poison)
    await rig.start_supervisor("sup-poison", rig.settings.supervisor.workflow_id)

    await a_failing_order_is_decided(rig)

    alerts = [a for a in await isolation_alerts(rig, poison) if a.kind == "task_check_failed"]
    assert len(alerts) == 1 and poison in alerts[0].message and cause in alerts[0].message, alerts


async def test_a_task_whose_type_no_worker_registers_does_not_stop_the_others(make_rig) -> None:  # type: ignore[no-untyped-def]
    """F17: the queue's workers are replaced by a build that no longer registers the task's type."""
    rig: Rig = await make_rig(extra_workflows=POISONS)
    poison = fresh_id("retired")
    await rig.submit(poison, order(), workflow="RetiredOrderWorkflow")
    await quiet(rig, poison)
    await rig.stop_task_worker()
    rig.extra_workflows = []
    await rig.start_task_worker()
    await rig.start_supervisor("sup-retired", rig.settings.supervisor.workflow_id)

    await a_failing_order_is_decided(rig)

    alerts = [a for a in await isolation_alerts(rig, poison) if a.kind == "task_check_failed"]
    assert len(alerts) == 1, alerts
    assert poison in alerts[0].message and "workflow type not registered on any worker" in alerts[0].message


async def test_a_decision_that_can_never_be_sent_does_not_stop_the_others(make_rig) -> None:  # type: ignore[no-untyped-def]
    """F3: a decision in the outbox whose request fails validation (a FailureCount above its bound)."""
    rig: Rig = await make_rig()
    poison = fresh_id("unsendable")
    async with rig.sessions() as session, session.begin():
        row = tables.Decision(
            task_id=poison,
            step="charge",
            failure_count=MAX_FAILURE_COUNT + 1,
            kind="retry",
            observed_state="Failed",
            reason="a FailureCount no request may carry",
            decided_by="test",
            decided_at=datetime.now(UTC),
            signal_sent_at=None,
        )
        session.add(row)
    await rig.start_supervisor("sup-unsendable", rig.settings.supervisor.workflow_id)

    await a_failing_order_is_decided(rig)

    alerts = [a for a in await isolation_alerts(rig, poison) if a.kind == "task_check_failed"]
    assert len(alerts) == 1 and "decision send failed: invalid as it is" in alerts[0].message, alerts
    # Given up, not retried for ever: out of the outbox.
    assert [d.signal_sent_at is not None for d in await rig.decisions(poison)] == [True]
