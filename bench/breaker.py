"""A payment outage with the circuit breaker off, then on: how many requests still reach payment,
and whether the other services keep their throughput.

    python bench/breaker.py --outage-s 60

Each mode runs a fresh stack: the Temporal dev server, the remote services with fault injection,
one ``worker.py`` (with one more task type, ``stock`` = reserve then ship, which does not use
payment: bench/_breaker_worker.py) and ``python -m supervisor``, with the default settings
otherwise (ladder, complete-by, quick retries). A steady load of --rate tasks per second, half
orders (reserve, charge, ship) and half stock tasks, runs for --normal-s seconds; then every
payment call answers 503 for --outage-s seconds (a fault rule on ``payment.*``, whose hit count
is the number of requests that reached payment); then payment recovers and the load stops.

Mode ``off`` runs without a breaker; mode ``on`` with payment's breaker
(``SAS_SERVICES__PAYMENT__BREAKER__ENABLED=true``, its defaults but ``--open-s``). The stock
tasks completed per second during the outage are compared with the same before it. With the
breaker on, the bench then waits until every order has completed (the held charges run once a
probe closes the breaker), up to --settle-timeout-s. One line:

    off_payment_requests=… on_payment_requests=… requests_ratio=… off_others_normal_per_s=…
    off_others_outage_per_s=… on_others_normal_per_s=… on_others_outage_per_s=… on_others_ratio=…
    on_orders=… on_orders_completed=… on_orders_compensated=… outage_s=… rate=…

The claim (docs/benchmarks.md): requests_ratio <= 0.1 and on_others_ratio within 0.9..1.1.
The script checks neither (a figure is measured, not asserted); it exits non-zero only if a
stack does not come up or, with the breaker on, an order neither completes nor is undone.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._stack import ROOT, BenchStack, order_payload, poll, print_summary, sas_client, wait_log


async def completed_between(sessions: Any, task_type: str, start: datetime, end: datetime) -> int:
    from sqlalchemy import func, select

    from sas.state_store.mirror_tables import Task

    async with sessions() as session:
        query = (
            select(func.count())
            .select_from(Task)
            .where(Task.task_type == task_type, Task.state == "Processed")
            .where(Task.updated_at >= start, Task.updated_at < end)
        )
        return int(await session.scalar(query) or 0)


async def states_of(sessions: Any, task_type: str) -> dict[str, int]:
    from sqlalchemy import func, select

    from sas.state_store.mirror_tables import Task

    async with sessions() as session:
        rows = await session.execute(
            select(Task.state, func.count()).where(Task.task_type == task_type).group_by(Task.state)
        )
        return {state: int(n) for state, n in rows}


async def run_mode(args: argparse.Namespace, breaker: bool) -> dict[str, Any]:
    from sas import state_store
    from sas.settings import DatabaseSettings, Settings

    queue = Settings().temporal.task_queue
    env = {
        "SAS_SERVICES__PAYMENT__BREAKER__ENABLED": "true" if breaker else "false",
        "SAS_SERVICES__PAYMENT__BREAKER__OPEN_S": str(args.open_s),
    }
    with BenchStack(keep=args.keep) as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=True)
        stack.migrate()
        worker = stack.python("worker", [str(ROOT / "bench" / "_breaker_worker.py")], SAS_LOG_LEVEL="INFO", **env)
        stack.supervisor(**env)
        wait_log(worker, r"polling", 90)
        client = await sas_client(stack.temporal_address)
        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        run = uuid.uuid4().hex[:6]
        submitted = {"order": 0, "stock": 0}
        stop = asyncio.Event()

        async def load() -> None:
            # A steady offered load, alternating the two task types.
            i = 0
            started = time.monotonic()
            while not stop.is_set():
                kind = "order" if i % 2 == 0 else "stock"
                workflow = "OrderWorkflow" if kind == "order" else "StockWorkflow"
                await client.start_workflow(workflow, order_payload(i), id=f"{kind}-{run}-{i}", task_queue=queue)
                submitted[kind] += 1
                i += 1
                # Paced on the clock from the start, so a slow submission does not lower the rate.
                delay = started + i / args.rate - time.monotonic()
                if delay > 0:
                    try:
                        await asyncio.wait_for(stop.wait(), delay)
                    except TimeoutError:
                        pass

        try:
            async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
                loader = asyncio.create_task(load())
                normal_start = datetime.now(UTC)
                await asyncio.sleep(args.normal_s)  # the load runs; nothing to wait on but the clock
                outage_start = datetime.now(UTC)
                fault = (await http.post("/admin/faults", json={"endpoint": "payment.*", "kind": "transient"})).json()[
                    "id"
                ]
                print(f"{'on' if breaker else 'off'}: payment down for {args.outage_s:g}s", file=sys.stderr, flush=True)
                await asyncio.sleep(args.outage_s)
                rules = (await http.get("/admin/faults")).json()["faults"]
                requests = next(r["hits"] for r in rules if r["id"] == fault)
                await http.delete(f"/admin/faults/{fault}")
                outage_end = datetime.now(UTC)
                stop.set()
                await loader
            # The last stock tasks finish within a second or two of their submission.
            await poll(
                lambda: states_of(sessions, "stock"),
                lambda s: s.get("Processed", 0) >= submitted["stock"],
                120,
                0.5,
                "every stock task to complete",
            )
            normal_s = (outage_start - normal_start).total_seconds()
            outage_s = (outage_end - outage_start).total_seconds()
            others_normal = await completed_between(sessions, "stock", normal_start, outage_start) / normal_s
            others_outage = await completed_between(sessions, "stock", outage_start, outage_end) / outage_s
            figures: dict[str, Any] = {
                "payment_requests": requests,
                "others_normal_per_s": round(others_normal, 2),
                "others_outage_per_s": round(others_outage, 2),
                "others_ratio": round(others_outage / others_normal, 3) if others_normal else "nan",
            }
            if breaker:
                orders = await poll(
                    lambda: states_of(sessions, "order"),
                    lambda s: s.get("Processed", 0) + s.get("Compensated", 0) >= submitted["order"],
                    args.settle_timeout_s,
                    1.0,
                    "every order to end after the outage",
                )
                figures |= {
                    "orders": submitted["order"],
                    "orders_completed": orders.get("Processed", 0),
                    "orders_compensated": orders.get("Compensated", 0),
                }
        finally:
            await engine.dispose()
    return figures


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    off = await run_mode(args, breaker=False)
    on = await run_mode(args, breaker=True)
    ratio = on["payment_requests"] / off["payment_requests"] if off["payment_requests"] else float("nan")
    return {
        "off_payment_requests": off["payment_requests"],
        "on_payment_requests": on["payment_requests"],
        "requests_ratio": round(ratio, 4),
        "off_others_normal_per_s": off["others_normal_per_s"],
        "off_others_outage_per_s": off["others_outage_per_s"],
        "on_others_normal_per_s": on["others_normal_per_s"],
        "on_others_outage_per_s": on["others_outage_per_s"],
        "on_others_ratio": on["others_ratio"],
        "on_orders": on["orders"],
        "on_orders_completed": on["orders_completed"],
        "on_orders_compensated": on["orders_compensated"],
        "outage_s": f"{args.outage_s:g}",
        "rate": f"{args.rate:g}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage-s", type=float, default=60, help="how long payment answers 503 (default 60)")
    parser.add_argument("--normal-s", type=float, default=20, help="load before the outage (default 20)")
    parser.add_argument("--rate", type=float, default=4, help="tasks submitted per second, half of them orders")
    parser.add_argument("--open-s", type=float, default=10, help="payment breaker: time open before a probe")
    parser.add_argument(
        "--settle-timeout-s", type=float, default=300, help="how long the held orders may take to end afterwards"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories with the logs")
    args = parser.parse_args()
    if not 1 <= args.outage_s <= 3600:
        parser.error("--outage-s must be between 1 and 3600")
    if not 1 <= args.normal_s <= 3600:
        parser.error("--normal-s must be between 1 and 3600")
    if not 0.1 <= args.rate <= 200:
        parser.error("--rate must be between 0.1 and 200")
    if not 0.1 <= args.open_s <= 3600:
        parser.error("--open-s must be between 0.1 and 3600")
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
