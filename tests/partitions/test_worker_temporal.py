"""A worker cut off from Temporal while it still reaches the state store and the services."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from sas.task_models import StepPolicyValues
from sas_demo_services import ServiceProcess
from tests import stack as stacks
from tests.helpers import fresh_id, wait_until
from tests.partitions.netns import namespace
from tests.partitions.rig import (
    WORKER,
    ledger_problems,
    mirror_agrees,
    polling,
    process_env,
    reach,
    results,
    spawned,
    supervisor_here,
    view,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy")]

# Temporal gives up on an attempt whose heartbeats stop within 3 s: the cut outlives it.
STEP = StepPolicyValues(
    complete_by_s=8.0, heartbeat_s=3.0, max_attempts=3, initial_interval_s=0.2, backoff=1.5, max_interval_s=1.0
)
CHARGE_MS = 3000  # each charge is still at the service when the cut comes


async def charge_attempts(client: Client, task_id: str) -> int:
    """The attempt Temporal has the order's charge at (0 once no charge is pending)."""
    described = await client.get_workflow_handle(task_id).describe()
    pending = [a for a in described.raw_description.pending_activities if a.activity_type.name == "payment.charge"]
    return max((a.attempt for a in pending), default=0)


@pytest.mark.timeout(180)
async def test_a_worker_cut_off_from_temporal_makes_each_call_once_and_finishes_once_healed(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str, tmp_path: Path
) -> None:
    """The worker loses Temporal while its charges are at the payment service. The calls finish
    there, but the worker cannot tell Temporal, which gives up on those attempts and schedules
    new ones. Healed, the worker takes them: the charge is asked for
    again under the same key and answered from the service's memory, so each order is charged
    once, completes, nothing is undone, and the mirror says what Temporal says."""
    with namespace() as ns:
        settings = stacks.test_settings(temporal_address, services.url, db_url, default_step=STEP)
        where = reach(ns, settings)
        async with view(client, settings, services.url) as stack, supervisor_here(stack):
            task_ids = [fresh_id("cut-temporal") for _ in range(3)]
            for task_id in task_ids:
                await stack.add_fault(
                    endpoint="payment.charge", kind="latency", latency_ms=CHARGE_MS, match_order_id=task_id
                )
            log = tmp_path / "worker.log"
            with spawned(ns, WORKER, process_env(settings, where), log) as worker:
                await polling(worker, log)
                handles = [await stack.submit(task_id) for task_id in task_ids]
                await wait_until(
                    lambda: asyncio.gather(*(stack.step_states(t) for t in task_ids)),
                    lambda states: all(s.get("charge") == "Processing" for s in states),
                    what="every order charging",
                )
                ns.cut("temporal")

                async def charged() -> list[Any]:
                    return [[e["action"] for e in await stack.ledger(t)] for t in task_ids]

                # The calls went through on the far side of the cut ...
                await wait_until(
                    charged, lambda seen: all("charge" in s for s in seen), timeout=30, what="the charges made"
                )
                # ... and Temporal, hearing nothing, gave up on each first attempt.
                await wait_until(
                    lambda: asyncio.gather(*(charge_attempts(client, t) for t in task_ids)),
                    lambda attempts: all(a >= 2 for a in attempts),
                    timeout=30,
                    what="Temporal to schedule each charge again",
                )
                ns.heal("temporal")
                ended = await results(handles)
                assert ended == dict.fromkeys(task_ids, "Processed"), ended
                await mirror_agrees(stack, task_ids)
                problems = [p for t in task_ids for p in await ledger_problems(stack, t, undone=False)]
                assert problems == [], problems
