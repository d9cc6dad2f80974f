"""One remote service cut off from the workers while its calls are under way (Temporal, the
state store and the other services still reach them)."""

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
    status,
    supervisor_here,
    view,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy")]

# Each attempt gives up on the silent service at its complete-by: two of them fail the step once.
STEP = StepPolicyValues(
    complete_by_s=4.0, heartbeat_s=2.0, max_attempts=2, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)
CHARGE_MS = 2000  # the charge takes effect at the service after the cut, its answer lost in it


@pytest.mark.timeout(180)
async def test_a_service_cut_off_mid_call_takes_effect_once_and_the_order_completes_once_healed(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str, tmp_path: Path
) -> None:
    """The payment service is cut off from the worker while it serves the charges: each charge
    takes effect there, but its answer never comes back, and the attempts after it cannot reach
    the service at all, so the step fails. Healed, the Supervisor's retry asks again under the
    same key and gets the stored answer: each order is charged once, completes, nothing is
    undone, and the mirror says what Temporal says."""
    with namespace() as ns:
        settings = stacks.test_settings(temporal_address, services.url, db_url, default_step=STEP)
        where = reach(ns, settings, payment_apart=True)
        async with view(client, settings, services.url) as stack, supervisor_here(stack):
            task_ids = [fresh_id("cut-payment") for _ in range(3)]
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
                ns.cut("payment")

                async def charges() -> list[Any]:
                    found = await asyncio.gather(*(status(h) for h in handles))
                    return [
                        next((s.state.value, s.failure_count) for s in t.steps if s.name == "charge") for t in found
                    ]

                # The worker heard nothing back, and the step failed ...
                await wait_until(
                    charges, lambda seen: all(n >= 1 for _, n in seen), timeout=60, what="every charge failed once"
                )
                # ... while the service made every charge.
                made = [[e["action"] for e in await stack.ledger(t)] for t in task_ids]
                assert made == [["reserve", "charge"]] * len(task_ids), made
                ns.heal("payment")
                ended = await results(handles)
                assert ended == dict.fromkeys(task_ids, "Processed"), ended
                await mirror_agrees(stack, task_ids)
                problems = [p for t in task_ids for p in await ledger_problems(stack, t, undone=False)]
                assert problems == [], problems
