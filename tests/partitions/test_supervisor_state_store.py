"""The Supervisor cut off from the state store while it still reaches Temporal.

PostgreSQL only: a SQLite store is a file on the Supervisor's own machine, which no network
partition can take from it.
"""

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
from tests.postgres import fresh_database
from tests.stack import STEADY_STEP, start_stack

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy"), pytest.mark.usefixtures("postgres_required")]


@pytest.mark.timeout(180)
async def test_a_supervisor_cut_off_from_postgresql_decides_each_failure_once_healed(
    client: Client, temporal_address: str, services: ServiceProcess, tmp_path: Path
) -> None:
    """Orders fail while the Supervisor cannot reach PostgreSQL (its connections go quiet): it
    cannot read their rows, so it decides nothing, and they wait at their failed step, neither
    lost nor undone. Healed, it takes each failure once, as after any pause: one retry that
    completes the order whose service failed twice, one compensation of the order refused, each
    effect in the ledger once, and the mirror agrees with Temporal."""
    with fresh_database() as db_url:
        async with start_stack(
            client, temporal_address, services.url, db_url, supervisor=False, default_step=STEADY_STEP
        ) as stack:
            with namespace() as ns:
                log = tmp_path / "supervisor.log"
                env = process_env(stack.settings, reach(ns, stack.settings))
                with spawned(ns, SUPERVISOR, env, log) as supervisor:
                    await polling(supervisor, log)
                    await supervisor_sweeping(stack)
                    ns.cut("database")
                    orders = await submit_failing(stack, "sup-cut-db")
                    await waiting_at_failed_ship(orders)
                    await supervisor_missed(stack)
                    assert [d for t in orders.ids for d in await stack.decisions(t)] == []
                    ns.heal("database")
                    await decided_once(stack, orders)
