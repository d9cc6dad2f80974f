"""A circuit breaker per remote service (sas/breaker/service.py), on real parts: the Temporal dev
server, the remote services in their own process (this module's own, so its fault rules and
counts are not shared), SQLite and PostgreSQL.

Payment fails; its breaker opens for every worker, one alert is raised, no request reaches
payment but the probes, and the charges of orders submitted meanwhile wait in payment's task
queue with no attempt started and no Supervisor decision. Payment recovers: a probe closes the
breaker, the alert resolves, and every order completes, none compensated.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from sas.breaker.model import BreakerView
from sas.breaker.rows import alert_key, read_breakers
from sas.settings import BreakerSettings, ServicesSettings, SupervisorSettings
from sas.state_store.queries import audit_for
from sas.state_store.tables import Alert
from sas.supervisor.models import SweepStats
from sas.task_models import TaskState
from sas_demo_services.launcher import ServiceProcess, free_port, start_service_process
from tests import cli_process
from tests.helpers import fresh_id, wait_until
from tests.stack import ADMIN_HEADERS, ADMIN_TOKEN, Stack, start_stack

ROOT = Path(__file__).resolve().parents[2]
# Open long enough that the checks while it is open usually see no probe (they allow for some).
PAYMENT_BREAKER = BreakerSettings(enabled=True, window_s=60, min_calls=3, failure_rate=0.5, open_s=20, sync_s=0.2)
FAILING_ORDERS = 4
QUEUE_CHECK_S = 1.0
SWEEP_S = 0.5


def _aware(at: datetime) -> datetime:
    """A time read back from the state store, in UTC (SQLite's come back naive)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


HELD_ORDERS = 3


@pytest.fixture(scope="module")
def own_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("breaker-services")
    process = start_service_process(
        free_port(),
        str(folder / "ledger.db"),
        enable_faults=True,
        log_path=str(folder / "log"),
        admin_token=ADMIN_TOKEN,
    )
    with process:
        yield process


@pytest_asyncio.fixture
async def breaker_stack(
    client: Client, temporal_address: str, own_services: ServiceProcess, db_url: str
) -> AsyncIterator[Stack]:
    registry = ServicesSettings(url=own_services.url, admin_token=ADMIN_TOKEN, payment={"breaker": PAYMENT_BREAKER})
    supervisor = SupervisorSettings(
        interval_s=SWEEP_S,
        failure_threshold=3,
        overdue_grace_s=1.5,
        cooldown_tries=0,
        queue_check_s=QUEUE_CHECK_S,  # the Supervisor's view of the breakers, refreshed with the queues
        workflow_id=fresh_id("supervisor-brk"),
    )
    async with start_stack(
        client, temporal_address, own_services.url, db_url, services=registry, supervisor_settings=supervisor
    ) as running:
        async with httpx.AsyncClient() as http:
            await http.delete(f"{own_services.url}/admin/faults", headers=ADMIN_HEADERS)
        yield running


async def payment(stack: Stack) -> BreakerView:
    async with stack.sessions() as session:
        return (await read_breakers(session)).get("payment", BreakerView(service="payment"))


async def fault_hits(stack: Stack, fault_id: str) -> int:
    async with httpx.AsyncClient() as http:
        rules = (await http.get(f"{stack.services_url}/admin/faults", headers=ADMIN_HEADERS)).json()["faults"]
    return next(r["hits"] for r in rules if r["id"] == fault_id)


async def breaker_alerts(stack: Stack) -> list[Alert]:
    from sqlalchemy import select

    async with stack.sessions() as session:
        rows = await session.scalars(select(Alert).where(Alert.kind == "breaker_open"))
        return list(rows.all())


async def charge_held(stack: Stack, task_id: str) -> bool:
    """The order's charge waits in payment's queue: scheduled, its first attempt not started."""
    described = await stack.client.get_workflow_handle(task_id).describe()
    pending = [a for a in described.raw_description.pending_activities if a.activity_type.name == "payment.charge"]
    print(
        task_id,
        [
            (a.activity_type.name, a.state, a.attempt, a.last_failure.message)
            for a in described.raw_description.pending_activities
        ],
    )
    return (
        len(pending) == 1
        and pending[0].state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        and pending[0].attempt == 1
    )


async def no_charge_running(stack: Stack, task_ids: list[str]) -> bool:
    """None of these orders has a charge attempt under way: every one ended, or waits in the queue."""
    for task_id in task_ids:
        described = await stack.client.get_workflow_handle(task_id).describe()
        for a in described.raw_description.pending_activities:
            if (
                a.activity_type.name == "payment.charge"
                and a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            ):
                return False
    return True


async def test_a_failing_service_opens_its_breaker_holds_its_steps_and_closes_when_it_recovers(
    breaker_stack: Stack,
) -> None:
    stack = breaker_stack
    fault = await stack.add_fault(endpoint="payment.charge", kind="transient")

    failing = [fresh_id("brk-a") for _ in range(FAILING_ORDERS)]
    failing_handles = [await stack.submit(task_id) for task_id in failing]
    opened = await wait_until(lambda: payment(stack), lambda v: v.state == "open", what="payment's breaker open")
    assert opened.failures >= PAYMENT_BREAKER.min_calls
    [alert] = await breaker_alerts(stack)
    assert (alert.incident_key, alert.status) == (alert_key("payment"), "open")

    # From when the Supervisor's own view (its `stats` query, refreshed at each queue check) names
    # the service it holds steps for, it decides nothing for them.
    supervisor = stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id)
    await wait_until(
        lambda: supervisor.query("stats", result_type=SweepStats),
        lambda s: s.breakers_holding == ["payment"],
        what="Supervisor's view",
    )
    # A sweep already under way when the view changed may still apply what it decided before.
    sweeps = await supervisor.query("sweeps")
    await wait_until(lambda: supervisor.query("sweeps"), lambda n: n >= sweeps + 2, what="two more sweeps")
    seen_by = datetime.now(UTC)
    # Orders submitted while it is open: their charges wait in payment's queue, unstarted.
    # Counted from the moment no failing order's charge is under way: an attempt that passed the
    # gate before a worker read the open row (every sync_s; later on a loaded machine) still
    # reaches payment, and is not a call the open breaker let through.
    await wait_until(lambda: no_charge_running(stack, failing), what="the failing orders' charges at rest")
    hits_at_open = await fault_hits(stack, fault)
    version_at_open = (await payment(stack)).version
    held = [fresh_id("brk-b") for _ in range(HELD_ORDERS)]
    held_handles = [await stack.submit(task_id) for task_id in held]
    for task_id in held:
        await wait_until(lambda t=task_id: charge_held(stack, t), what=f"{task_id}'s charge held")  # type: ignore[misc]
    # The Supervisor sweeps a few times over them meanwhile.
    sweeps = await supervisor.query("sweeps")
    await wait_until(lambda: supervisor.query("sweeps"), lambda n: n >= sweeps + 3, what="three more sweeps")

    still = await payment(stack)
    assert still.state in ("open", "half_open")
    # Failing fast: since it opened, the only requests that reached payment were probes, one per
    # claim of the probe (each claim and each reopening is one version of the row).
    probes = (still.version - version_at_open + 1) // 2
    assert await fault_hits(stack, fault) - hits_at_open <= probes
    probed = 0
    for task_id in held:
        assert await stack.decisions(task_id) == []
        charge = next(s for s in (await stack.record(task_id)).steps if s.name == "charge")  # type: ignore[union-attr]
        assert charge.failure_count == 0, charge
        if not await charge_held(stack, task_id):
            probed += 1  # a probe's call is a real call: it may have spent an attempt
            continue
        # Pending, or Processing in attempt 1 for a charge a poll took just as the breaker opened:
        # its Agent sent nothing, and the Scheduler started it again to wait in the queue.
        assert charge.attempt <= 1, charge
    assert probed <= probes
    # No retry, compensate or park for a step held by the breaker. A step that failed for good
    # before the breaker opened may have been decided on by a sweep that had not yet read the
    # breaker's state (it does at each queue check): only a decision later than that counts, and
    # only while the breaker is open: from open_s on it is half-open, and a retry may be its probe
    # (a loaded machine gets this far after open_s).
    assert opened.since is not None
    half_open_from = _aware(opened.since) + timedelta(seconds=PAYMENT_BREAKER.open_s)
    for task_id in failing:
        decided = await stack.decisions(task_id)
        decided_while_open = [
            d for d in decided if d.kind != "wait" and seen_by < _aware(d.decided_at) < half_open_from
        ]
        assert [(d.kind, d.decided_at) for d in decided_while_open] == []
    # `sas services`: open, the failure rate of the window that opened it, when it began, the next probe.
    shown = await sas(stack, "services", "--json")
    assert shown.returncode == 0, shown.stderr
    row = next(r for r in json.loads(shown.stdout) if r["service"] == "payment")
    assert (row["state"] in ("open", "half_open"), row["holding"], row["failure_rate"]) == (True, True, 1.0)
    assert row["calls"] >= 1 and row["since"] is not None
    assert row["next_probe"] is not None or row["state"] == "half_open"
    # The Supervisor's own view (its `stats` query) names the service it holds steps for.
    await wait_until(
        lambda: supervisor.query("stats", result_type=SweepStats),
        lambda s: s.breakers_holding == ["payment"],
        what="Supervisor's view",
    )

    # Payment recovers: a probe closes the breaker, its one alert resolves, and every order
    # completes with nothing undone; the held charges in their first attempt.
    await stack.remove_fault(fault)
    await wait_until(lambda: payment(stack), lambda v: v.state == "closed", timeout=90, what="breaker closed")
    [alert] = await breaker_alerts(stack)
    assert alert.status == "resolved"
    for handle in [*held_handles, *failing_handles]:
        assert (await handle.result()).state == TaskState.PROCESSED
    for task_id in held:
        charge = next(s for s in (await stack.record(task_id)).steps if s.name == "charge")  # type: ignore[union-attr]
        assert charge.failure_count == 0 and (charge.attempt == 1 or probed), charge
        assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge", "ship"]


async def sas(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The command in its own process, waited on off the event loop: the stack runs on this loop,
    and a session of its own holding the SQLite write lock must be able to finish meanwhile (a
    blocking wait here once held the lock until the command gave up, "database is locked")."""
    env = {
        **os.environ,
        "SAS_DATABASE__URL": stack.settings.database.url,
        "SAS_TEMPORAL__TASK_QUEUE": stack.settings.temporal.task_queue,
        # The stack's own service settings: payment's breaker gives it a queue of its own.
        "SAS_SERVICES__PAYMENT__BREAKER__ENABLED": "true",
        "COLUMNS": "80",
    }
    return await asyncio.to_thread(
        cli_process.run,
        [sys.executable, "-c", "from sas.cli.main import main; main()", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_an_operator_forces_a_breaker_open_and_closed_audited(breaker_stack: Stack) -> None:
    stack = breaker_stack
    forced = await sas(stack, "services", "open", "payment", "--reason", "provider maintenance", "--by", "alice")
    assert forced.returncode == 0, forced.stderr
    assert "closed -> open (forced)" in forced.stdout
    await wait_until(lambda: payment(stack), lambda v: v.forced_by == "alice", what="forced open")
    # A worker follows the shared row within its sync_s (0.2 s here); an order submitted before
    # then could reach payment, faster than that, before this worker's gate holds.
    assert stack.breakers is not None
    worker_payment = stack.breakers["payment"]

    async def gate_holds() -> bool:
        return worker_payment.holding()

    await wait_until(gate_holds, what="this worker's gate holding payment")

    task_id = fresh_id("brk-forced")
    handle = await stack.submit(task_id)
    await wait_until(lambda: charge_held(stack, task_id), what="charge held by the forced breaker")
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve"]  # payment was not called
    shown = await sas(stack, "services", "--json")
    assert shown.returncode == 0 and shown.stdout.strip(), f"exit {shown.returncode}; stderr: {shown.stderr}"
    rows: list[dict[str, Any]] = json.loads(shown.stdout)
    row = next(r for r in rows if r["service"] == "payment")
    assert (row["state"], row["forced_by"], row["holding"], row["next_probe"]) == ("open", "alice", True, None)
    assert row["queue"] == f"{stack.settings.temporal.task_queue}.payment"
    table = await sas(stack, "services")
    assert table.returncode == 0 and "open (forced)" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80

    closed = await sas(stack, "services", "close", "payment", "--reason", "maintenance over", "--by", "bob")
    assert closed.returncode == 0, closed.stderr
    assert (await handle.result()).state == TaskState.PROCESSED
    charge = next(s for s in (await stack.record(task_id)).steps if s.name == "charge")  # type: ignore[union-attr]
    # The hold spent none of the step's attempts. One more is possible on a busy machine: an
    # attempt started in the moment before the worker's gate saw the forced state is refused by
    # the caller's own check, before any request (the ledger shows payment charged once).
    assert charge.attempt <= 2
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge", "ship"]

    async with stack.sessions() as session:
        entries = await audit_for(session, "service:payment")
    assert [(e.action, e.actor, e.reason, e.changed) for e in entries] == [
        ("breaker_open", "alice", "provider maintenance", "breaker closed -> open (forced)"),
        ("breaker_closed", "bob", "maintenance over", "breaker open (forced) -> closed"),
    ]
    [alert] = await breaker_alerts(stack)
    assert alert.status == "resolved" and "forced open by alice" in alert.message


async def test_an_unknown_service_or_no_reason_is_refused(breaker_stack: Stack) -> None:
    unknown = await sas(breaker_stack, "services", "open", "fraud", "--reason", "x")
    assert unknown.returncode == 2 and "no service named 'fraud'" in unknown.stderr + unknown.stdout
    blank = await sas(breaker_stack, "services", "open", "payment", "--reason", " ")
    assert blank.returncode == 2 and "--reason is required" in blank.stderr + blank.stdout
