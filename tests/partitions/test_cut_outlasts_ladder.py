"""One remote service cut off from the workers for longer than the Supervisor's whole retry
ladder, while a call to it is under way (Temporal, the state store and the other services still
reach them)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from sas.task_models import StepPolicyValues, TaskState
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
    complete_by_s=3.0, heartbeat_s=2.0, max_attempts=2, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)
CHARGE_MS = 1500  # the charge takes effect at the service after the cut, its answer lost in it


@pytest.mark.timeout(240)
async def test_a_cut_that_outlasts_the_ladder_undoes_the_task_and_the_charge_made_in_it(
    client: Client, temporal_address: str, services: ServiceProcess, db_url: str, tmp_path: Path
) -> None:
    """The payment service is cut off while it serves the charges and stays cut while the
    Supervisor spends its whole ladder on the failed step (the tests' ladder: two retries, then
    compensate). So the task is undone, and its undo meets the same cut: the charge's answer was
    lost, so only the service knows it was made. Healed once the undo has begun, the undo asks
    the service (the declared lookup), finds the charge and refunds it: each order ends
    Compensated with its charge refunded and its stock released once each, nothing shipped, no
    key used twice, and the mirror says what Temporal says."""
    with namespace() as ns:
        settings = stacks.test_settings(temporal_address, services.url, db_url, default_step=STEP)
        assert settings.supervisor.failure_threshold == 3 and settings.supervisor.cooldown_tries == 0
        where = reach(ns, settings, payment_apart=True)
        async with view(client, settings, services.url) as stack, supervisor_here(stack):
            task_ids = [fresh_id("cut-ladder")]  # one: its ladder alone decides when the undo begins
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

                async def seen() -> list[Any]:
                    return [await status(h) for h in handles]

                # The ladder is spent while the cut lasts: two Supervisor retries, each failing
                # again, then the undo is decided and begins.
                undoing = await wait_until(
                    seen,
                    lambda found: all(t.state in (TaskState.COMPENSATING, TaskState.COMPENSATED) for t in found),
                    timeout=150,
                    what="every order's ladder spent and its undo begun, the service still cut off",
                )
                assert [t.state for t in undoing] == [TaskState.COMPENSATING] * len(task_ids), undoing
                charge_failures = [next(s.failure_count for s in t.steps if s.name == "charge") for t in undoing]
                assert all(n >= 3 for n in charge_failures), charge_failures
                made = [[e["action"] for e in await stack.ledger(t)] for t in task_ids]
                assert made == [["reserve", "charge"]] * len(task_ids), made
                ns.heal("payment")
                ended = await results(handles, timeout=120)
                assert ended == dict.fromkeys(task_ids, "Compensated"), ended
                await mirror_agrees(stack, task_ids)
                problems = [p for t in task_ids for p in await ledger_problems(stack, t, undone=True)]
                assert problems == [], problems
