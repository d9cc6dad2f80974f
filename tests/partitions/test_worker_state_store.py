"""A worker cut off from the state store while Temporal still reaches it.

PostgreSQL only: a SQLite store is a file on the worker's own machine, which no network
partition can take from it (its outage, a lock held, is tests/bad_input/test_mirror_outage.py's).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

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
from tests.postgres import fresh_database

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy"), pytest.mark.usefixtures("postgres_required")]

# Long enough for an Agent to wait on its row and still make its call; a cut that outlives the
# attempt is not what this test is about.
STEP = StepPolicyValues(
    complete_by_s=8.0, heartbeat_s=3.0, max_attempts=3, initial_interval_s=0.2, backoff=1.5, max_interval_s=1.0
)


@pytest.mark.timeout(180)
async def test_a_worker_cut_off_from_postgresql_goes_on_and_the_mirror_catches_up(
    client: Client, temporal_address: str, services: ServiceProcess, tmp_path: Path
) -> None:
    """Orders charging when the worker loses PostgreSQL (its connections go quiet, nothing is
    refused) go on without their rows and complete in Temporal during the cut; orders started
    during the cut wait at their accept. Healed, every order completes once, each effect in the ledger once, nothing undone,
    and the mirror comes to say what Temporal says."""
    with fresh_database() as db_url, namespace() as ns:
        settings = stacks.test_settings(temporal_address, services.url, db_url, default_step=STEP)
        where = reach(ns, settings)
        async with view(client, settings, services.url) as stack, supervisor_here(stack):
            first = [fresh_id("cut-db") for _ in range(3)]
            for task_id in first:
                await stack.add_fault(
                    endpoint="payment.charge", kind="latency", latency_ms=2000, match_order_id=task_id
                )
            log = tmp_path / "worker.log"
            with spawned(ns, WORKER, process_env(settings, where), log) as worker:
                await polling(worker, log)
                handles = [await stack.submit(task_id) for task_id in first]
                await wait_until(
                    lambda: asyncio.gather(*(stack.step_states(t) for t in first)),
                    lambda states: all(s.get("charge") == "Processing" for s in states),
                    what="every order charging",
                )
                ns.cut("database")
                during = [fresh_id("cut-db-during") for _ in range(2)]
                handles += [await stack.submit(task_id) for task_id in during]

                # The worker goes on without its rows: the orders it was running end in Temporal,
                # while the orders started since wait at their accept (no row, no call made).
                ended = await results(handles[: len(first)], timeout=60)
                assert ended == dict.fromkeys(first, "Processed"), ended
                assert [await stack.record(t) for t in during] == [None] * len(during)
                assert [await stack.ledger(t) for t in during] == [[]] * len(during)
                ns.heal("database")
                ended = await results(handles)
                assert ended == dict.fromkeys(first + during, "Processed"), ended
                await mirror_agrees(stack, first + during)
                problems = [p for t in first + during for p in await ledger_problems(stack, t, undone=False)]
                assert problems == [], problems
