"""The Supervisor down for a while (five times the steps' complete-by) while orders run and
some of their steps fail: nothing is undone, and when it comes back it takes exactly the
decisions it would have taken had it been there - one retry per failure, no burst, no
FailureCount grown by the time it was away."""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import TaskResult, TaskState, TaskStatus
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.stack import FAST_STEP, start_stack

OUTAGE_S = 5 * FAST_STEP.complete_by_s  # how long the Supervisor is away (not a wait for anything)


async def test_orders_ride_out_a_supervisor_outage(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as stack:
        settings = stack.settings
        async with build_worker(client, settings, stack.sessions, "outage-supervisor"):
            await ensure_supervisor_running(client, settings)
        # The Supervisor's workflow lives on in Temporal; nothing runs it now.

        plain = [fresh_id("sup-out-ok") for _ in range(3)]
        failing = [fresh_id("sup-out-fail") for _ in range(3)]
        for task_id in failing:
            # Both quick attempts fail: the step is Failed and waits for the Supervisor's decision.
            await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
        handles = {t: await stack.submit(t) for t in plain + failing}

        await wait_until(
            lambda: asyncio.gather(*(handles[t].query("status", result_type=TaskStatus) for t in failing)),
            lambda statuses: all(any(s.state == "Failed" for s in st.steps) for st in statuses),
            what="the failing orders to wait for a decision",
        )
        for task_id in plain:
            assert (await handles[task_id].result()).state == TaskState.PROCESSED
        await asyncio.sleep(OUTAGE_S)
        for task_id in failing:
            assert await stack.decisions(task_id) == []  # nobody decided while it was away

        async with build_worker(client, settings, stack.sessions, "outage-supervisor-back"):
            results: list[TaskResult] = await asyncio.wait_for(
                asyncio.gather(*(handles[t].result() for t in failing)), timeout=120
            )
        assert [r.state for r in results] == [TaskState.PROCESSED] * len(failing)

        for task_id in plain:
            assert await stack.decisions(task_id) == []
        for task_id in plain + failing:
            ledger = await stack.ledger(task_id)
            assert [e["action"] for e in ledger] == ["reserve", "charge", "ship"], (task_id, ledger)
            assert [a.kind for a in await stack.alerts(task_id)] == [], task_id
        for task_id in failing:
            kinds = [d.kind for d in await stack.decisions(task_id) if d.kind != "wait"]
            assert kinds == ["retry"], (task_id, kinds)  # the first rung, once: no burst
            status = await handles[task_id].query("status", result_type=TaskStatus)
            assert {s.name: s.failure_count for s in status.steps} == {"reserve": 0, "charge": 0, "ship": 1}
