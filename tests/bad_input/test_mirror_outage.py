"""The state store (PostgreSQL) refusing connections for a few seconds while orders run.

Mirror writes retry, workflows wait, and once the database is back everything catches
up: every order ends Processed in Temporal and in the mirror, with exactly one effect
per idempotency key in the ledger, and the Supervisor is still running."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from sas.task_models import StepPolicyValues, TaskStatus
from sas_demo_services import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.postgres import _run, fresh_database
from tests.stack import Stack, start_stack

OUTAGE_S = 4.0  # how long the fault lasts (not a wait for anything)
ALL_PROCESSED = ("Processed", {"reserve": "Processed", "charge": "Processed", "ship": "Processed"})

pytestmark = pytest.mark.usefixtures("postgres_required")


def refuse_connections(database: str) -> None:
    _run(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
    _run(
        f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}' AND pid <> pg_backend_pid()"
    )


def allow_connections(database: str) -> None:
    _run(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


@asynccontextmanager
async def database_away(database: str, sqlite_path: Path | None) -> AsyncIterator[None]:
    if sqlite_path is None:
        refuse_connections(database)
        try:
            yield
        finally:
            allow_connections(database)
        return
    # Another connection holds SQLite's write lock: every writer waits out its busy timeout, then fails.
    # It is taken without waiting in SQLite (timeout 0), tried again off the event loop's back: a
    # blocking wait here would stop this process's own workers, one of which may hold the lock in
    # a transaction that needs the loop to finish, and the wait would never end.
    holder = sqlite3.connect(sqlite_path, isolation_level=None, timeout=0)
    try:
        deadline = asyncio.get_running_loop().time() + 120
        while True:
            try:
                holder.execute("BEGIN EXCLUSIVE")
                break
            except sqlite3.OperationalError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.005)
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
    finally:
        holder.close()


@asynccontextmanager
async def orders_through_an_outage(
    client: Client,
    temporal_address: str,
    services: ServiceProcess,
    outage_s: float = OUTAGE_S,
    sqlite_path: Path | None = None,
    **overrides: Any,
) -> AsyncIterator[tuple[Stack, list[str]]]:
    """Six orders busy in their charge Agent when the database goes away, three more
    submitted while it is away; yields once every workflow has finished. PostgreSQL refuses
    connections; the embedded SQLite store (``sqlite_path``) is locked by another connection."""
    with ExitStack() as exits:
        url = f"sqlite+aiosqlite:///{sqlite_path}" if sqlite_path is not None else exits.enter_context(fresh_database())
        database = url.rsplit("/", 1)[1]
        async with start_stack(client, temporal_address, services.url, url, **overrides) as stack:
            before = [fresh_id("pg-out") for _ in range(6)]
            for task_id in before:
                await stack.add_fault(
                    endpoint="payment.charge", kind="latency", latency_ms=1500, match_order_id=task_id
                )
            handles = [await stack.submit(task_id) for task_id in before]
            await wait_until(
                lambda: asyncio.gather(*(stack.step_states(t) for t in before)),
                lambda states: all(s.get("charge") == "Processing" for s in states),
                what="every first order charging",
            )
            async with database_away(database, sqlite_path):
                # These cannot even be accepted into the mirror until the database is back.
                during = [fresh_id("pg-during") for _ in range(3)]
                handles += [await stack.submit(task_id) for task_id in during]
                await asyncio.sleep(outage_s)
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=120)
            assert [r.state for r in results] == ["Processed"] * len(handles), [(r.task_id, r.state) for r in results]
            yield stack, before + during


async def test_orders_catch_up_after_the_database_refuses_connections(
    client: Client, temporal_address: str, services: ServiceProcess
) -> None:
    async with orders_through_an_outage(client, temporal_address, services) as (stack, task_ids):

        async def mirrored() -> dict[str, tuple[str | None, dict[str, str]]]:
            return {t: (await stack.task_state(t), await stack.step_states(t)) for t in task_ids}

        await wait_until(
            mirrored, lambda m: all(v == ALL_PROCESSED for v in m.values()), what="the mirror to catch up with Temporal"
        )
        for task_id in task_ids:
            ledger = await stack.ledger(task_id)
            assert [e["action"] for e in ledger] == ["reserve", "charge", "ship"], (task_id, ledger)
            assert set(Counter(e["idempotency_key"] for e in ledger).values()) == {1}, (task_id, ledger)
        supervisor = await client.get_workflow_handle(stack.settings.supervisor.workflow_id).describe()
        assert supervisor.status == WorkflowExecutionStatus.RUNNING


async def test_a_database_outage_fails_no_step(client: Client, temporal_address: str, services: ServiceProcess) -> None:
    # The production step policy (complete-by 10 s, 3 quick attempts): long enough to ride out a 4 s outage.
    async with orders_through_an_outage(client, temporal_address, services, default_step=StepPolicyValues()) as (
        stack,
        task_ids,
    ):
        failed = {}
        for task_id in task_ids:
            status = await stack.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
            failed.update({f"{task_id}:{s.name}:last_error": s.last_error for s in status.steps if s.last_error})
            failed.update(
                {f"{task_id}:{d.step}:decision": d.kind for d in await stack.decisions(task_id) if d.kind != "wait"}
            )
        assert failed == {}


@pytest.mark.parametrize("backend", ["postgresql", "sqlite"])
async def test_an_outage_longer_than_complete_by_is_waited_out(
    client: Client, temporal_address: str, services: ServiceProcess, backend: str, tmp_path: Path
) -> None:
    """The database is away for 2.5 times the steps' complete-by (production policy, 10 s): the
    Agents go on without their rows instead of failing their attempts, nothing is undone, no
    FailureCount grows, no decision follows, and the mirror catches up from Temporal."""
    policy = StepPolicyValues()
    async with orders_through_an_outage(
        client,
        temporal_address,
        services,
        outage_s=2.5 * policy.complete_by_s,
        sqlite_path=tmp_path / "state.db" if backend == "sqlite" else None,
        default_step=policy,
    ) as (stack, task_ids):
        for task_id in task_ids:
            ledger = await stack.ledger(task_id)
            assert [e["action"] for e in ledger] == ["reserve", "charge", "ship"], (task_id, ledger)
            status = await stack.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
            assert [(s.state, s.failure_count, s.last_error) for s in status.steps] == [("Processed", 0, None)] * 3
            assert [d.kind for d in await stack.decisions(task_id) if d.kind != "wait"] == [], task_id

        async def mirrored() -> dict[str, tuple[str | None, dict[str, str]]]:
            return {t: (await stack.task_state(t), await stack.step_states(t)) for t in task_ids}

        await wait_until(
            mirrored, lambda m: all(v == ALL_PROCESSED for v in m.values()), what="the mirror to catch up with Temporal"
        )
        for task_id in task_ids:
            record = await stack.record(task_id)
            assert record is not None and max(r.failure_count for r in record.steps) == 0
