"""The Supervisor cut off from Temporal while the workers run on (it still reaches the store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from sas_demo_services import ServiceProcess
from tests.partitions.netns import namespace
from tests.partitions.rig import (
    SUPERVISOR,
    decided_once,
    polling,
    process_env,
    reach,
    spawned,
    submit_failing,
    supervisor_missed,
    supervisor_sweeping,
    waiting_at_failed_ship,
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
                orders = await submit_failing(stack, "sup-cut-temporal")
                await waiting_at_failed_ship(orders)
                await supervisor_missed(stack)
                assert [d for t in orders.ids for d in await stack.decisions(t)] == []
                ns.heal("temporal")
                await decided_once(stack, orders)
