"""The Supervisor cut off from Temporal while the workers run on (it still reaches the store)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import Client

from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.partitions.netns import namespace
from tests.partitions.rig import (
    SUPERVISOR,
    decision_problems,
    ledger_problems,
    mirror_agrees,
    polling,
    process_env,
    reach,
    results,
    spawned,
    status,
    supervisor_missed,
    supervisor_sweeping,
)
from tests.stack import STEADY_STEP, start_stack

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy")]


@pytest.mark.timeout(180)
async def test_a_supervisor_cut_off_from_temporal_decides_each_failure_once_healed(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str, tmp_path: Path
) -> None:
    """Orders fail while the Supervisor cannot reach Temporal: the workers run them to their
    failed step, where they wait (nothing is decided for them meanwhile, and they are neither
    lost nor undone). Healed, the Supervisor takes each failure once: the order whose service
    failed twice is retried once and completes, the order the service refused is undone, each
    with exactly that one decision, each effect in the ledger once, and the mirror agrees."""
    async with start_stack(
        client, temporal_address, services.url, db_url, supervisor=False, default_step=STEADY_STEP
    ) as stack:
        with namespace() as ns:
            log = tmp_path / "supervisor.log"
            with spawned(ns, SUPERVISOR, process_env(stack.settings, reach(ns, stack.settings)), log) as supervisor:
                await polling(supervisor, log)
                await supervisor_sweeping(stack)
                ns.cut("temporal")
                retried = [fresh_id("sup-cut-retry") for _ in range(2)]
                refused = [fresh_id("sup-cut-refused") for _ in range(2)]
                for task_id in retried:
                    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
                for task_id in refused:
                    await stack.add_fault(
                        endpoint="shipping.ship",
                        kind="permanent",
                        status=422,
                        error="address_rejected",
                        match_order_id=task_id,
                    )
                handles = [await stack.submit(task_id) for task_id in retried + refused]

                async def ships() -> list[str]:
                    found = await asyncio.gather(*(status(h) for h in handles))
                    return [
                        f"{t.state.value}/{next(s.state.value for s in t.steps if s.name == 'ship')}" for t in found
                    ]

                # The workers ran each order to its failed ship, where it waits for a decision ...
                await wait_until(
                    ships,
                    lambda seen: seen == ["Failed/Failed"] * len(handles),
                    timeout=60,
                    what="every ship failed",
                )
                # ... and Temporal has seen the Supervisor miss its work.
                await supervisor_missed(stack)
                assert [d for t in retried + refused for d in await stack.decisions(t)] == []
                ns.heal("temporal")
                ended = await results(handles)
                assert ended == dict.fromkeys(retried, "Processed") | dict.fromkeys(refused, "Compensated"), ended
                problems = await decision_problems(
                    stack,
                    {t: [("retry", "ship", 1)] for t in retried} | {t: [("compensate", "ship", 1)] for t in refused},
                )
                for task_id in retried + refused:
                    problems += await ledger_problems(stack, task_id, undone=task_id in refused)
                assert problems == [], problems
                await mirror_agrees(stack, retried + refused)
