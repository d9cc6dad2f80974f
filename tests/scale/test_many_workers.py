"""The distributed case on one machine: 3 worker and 2 Supervisor processes (``sas up
--workers 3 --supervisors 2``, through LocalStack) over PostgreSQL. Orders spread over
the workers, none has a duplicate effect in the ledger, every one completes, and
SIGKILLing a worker mid-step loses nothing."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import select

from sas import state_store
from sas.runtime.local_stack import LocalStack, LocalStackConfig
from sas.settings import DatabaseSettings, TemporalSettings
from sas.state_store.mirror_tables import Step
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until

pytestmark = pytest.mark.slow  # sas up --workers 3 --supervisors 2

ROOT = Path(__file__).resolve().parents[2]
ORDER = {"customer_id": "c-1", "sku": "BOOK-1", "quantity": 1, "amount_cents": 1299, "address": "1 Main St"}


@pytest_asyncio.fixture(loop_scope="session")
async def cluster(pg_url: str, tmp_path: Path) -> AsyncIterator[tuple[LocalStack, object]]:
    config = LocalStackConfig(
        state_dir=tmp_path / "sas",
        temporal_port=free_port(),
        ui_port=free_port(),
        services_port=free_port(),
        workers=3,
        supervisors=2,
        enable_faults=True,
        extra_env={
            "SAS_DATABASE__URL": pg_url,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "SAS_SUPERVISOR__INTERVAL_S": "1",
        },
    )
    stack = LocalStack(config)
    await asyncio.to_thread(stack.start)
    try:
        from sas.runtime.connect import connect

        client = await connect(TemporalSettings(address=config.temporal_address), "test")
        logs = [c for c in stack.children() if c.name.startswith(("worker", "supervisor"))]

        async def all_polling() -> list[bool]:
            return ["polling" in c.log_path.read_text(errors="replace") for c in logs]

        await wait_until(all_polling, all, timeout=90, what="every worker and Supervisor to poll")
        yield stack, client
    finally:
        await asyncio.to_thread(stack.stop)


async def _ledger(url: str, order_id: str) -> list[dict]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        response = await http.get("/ledger", params={"order_id": order_id})
        response.raise_for_status()
        return response.json()["entries"]


async def test_many_workers_on_postgres_no_duplicates_and_a_killed_worker_loses_nothing(cluster, pg_url: str) -> None:
    stack, client = cluster
    url = stack.config.services_url
    n = 30
    async with httpx.AsyncClient(base_url=url, headers=stack.config.admin_headers, timeout=10) as http:
        # hold every charge a moment so orders are mid-step on every worker when one is killed
        fault = (
            await http.post(
                "/admin/faults", json={"endpoint": "payment.charge", "kind": "latency", "latency_ms": 2500, "times": n}
            )
        ).json()["id"]
        ids = [fresh_id("scale") for _ in range(n)]
        handles = await asyncio.gather(
            *(client.start_workflow("OrderWorkflow", ORDER, id=i, task_queue="sas-tasks") for i in ids)
        )
        engine = state_store.create_engine(DatabaseSettings(url=pg_url))
        sessions = state_store.session_factory(engine)
        lockers: set[str] = set()
        try:

            async def charging() -> int:
                async with sessions() as session:
                    rows = (
                        await session.execute(
                            select(Step.locked_by).where(
                                Step.task_id.in_(ids), Step.name == "charge", Step.state == "Processing"
                            )
                        )
                    ).all()
                lockers.update(r[0] for r in rows if r[0])
                rules = (await http.get("/admin/faults")).json()["faults"]
                return next(r["hits"] for r in rules if r["id"] == fault)

            await wait_until(charging, lambda hits: hits >= n // 2, timeout=60, what="orders in their charge step")
        finally:
            await engine.dispose()
        assert len(lockers) >= 2, f"the orders ran on one worker only: {lockers}"

        victim = next(c for c in stack.children() if c.name == "worker-1")
        victim.kill()  # SIGKILL, mid-step
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=120)
        assert [r["state"] for r in results] == ["Processed"] * n

    for order_id in ids:
        entries = await _ledger(url, order_id)
        keys = [e["idempotency_key"] for e in entries]
        assert len(keys) == len(set(keys)), f"{order_id}: duplicate effects {keys}"
        assert sorted(keys) == sorted(f"{order_id}:{s}" for s in ("reserve", "charge", "ship")), keys
    async with httpx.AsyncClient(base_url=url, headers=stack.config.admin_headers, timeout=10) as http:
        await http.delete("/admin/faults")
