"""Worker memory with many tasks in flight.

    python bench/memory.py --tasks 1000

Starts a Temporal dev server (in memory), the remote services with fault injection and
one ``python worker.py`` (mirror on; no Supervisor, which runs in its own process). A
``latency`` fault holds every ``inventory.reserve`` call for --hold-s (its complete-by
is raised above that with SAS_STEPS__RESERVE__COMPLETE_BY_S, so nothing times out).
After a warm-up of 20 orders, the worker's RSS is the baseline; then --tasks orders are
submitted and the worker's RSS is sampled until every one has been accepted (its rows
are in the state store) and for --settle-s more. Peak = the kernel's VmHWM.
per_task_kb = (peak - baseline) / tasks. The worker runs at most 100 activities at
once (the SDK default), so 100 calls are held and the other tasks wait at the server
with their workflows cached in the worker (cache size: the SDK default, 1,000).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._stack import BenchStack, order_payload, poll, print_summary, rss_kb, sas_client, wait_log


async def bench(args: argparse.Namespace) -> dict[str, object]:
    with BenchStack(keep=args.keep) as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=True)
        stack.migrate()
        worker = stack.sas_worker("worker", SAS_STEPS__RESERVE__COMPLETE_BY_S=str(args.hold_s + 120))
        wait_log(worker, r"polling", 90)
        pid = worker.process.pid
        client = await sas_client(stack.temporal_address)
        run = uuid.uuid4().hex[:6]
        warm = await asyncio.gather(
            *(
                client.start_workflow("OrderWorkflow", order_payload(i), id=f"mem-{run}-w{i}", task_queue="sas-tasks")
                for i in range(20)
            )
        )
        await asyncio.gather(*(h.result() for h in warm))
        baseline = rss_kb(pid)
        from sqlalchemy import func, select

        from sas import state_store
        from sas.settings import DatabaseSettings
        from sas.state_store.mirror_tables import Task

        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        try:
            async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
                await http.post(
                    "/admin/faults",
                    json={"endpoint": "inventory.reserve", "kind": "latency", "latency_ms": int(args.hold_s * 1000)},
                )
                sem = asyncio.Semaphore(64)

                async def submit(i: int):
                    async with sem:
                        return await client.start_workflow(
                            "OrderWorkflow", order_payload(i), id=f"mem-{run}-{i}", task_queue="sas-tasks"
                        )

                started = time.monotonic()
                await asyncio.gather(*(submit(i) for i in range(args.tasks)))
                samples = []

                async def accepted() -> int:
                    samples.append(rss_kb(pid))
                    async with sessions() as session:
                        return int(
                            await session.scalar(
                                select(func.count())
                                .select_from(Task)
                                .where(Task.task_id.like(f"mem-{run}-%"), Task.task_id.notlike(f"mem-{run}-w%"))
                            )
                            or 0
                        )

                await poll(accepted, lambda n: n >= args.tasks, 300, 0.2, "every task to be accepted")
                in_flight_s = time.monotonic() - started
                settle_end = time.monotonic() + args.settle_s
                while time.monotonic() < settle_end:
                    samples.append(rss_kb(pid))
                    await asyncio.sleep(0.2)
                peak = rss_kb(pid, "VmHWM")
        finally:
            await engine.dispose()
        return {
            "tasks": args.tasks,
            "peak_rss_mb": round(peak / 1024, 1),
            "per_task_kb": round((peak - baseline) / args.tasks, 1),
            "baseline_rss_mb": round(baseline / 1024, 1),
            "max_sampled_rss_mb": round(max(samples) / 1024, 1),
            "all_in_flight_after_s": round(in_flight_s, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--hold-s", type=float, default=120.0, help="latency of each reserve call (default 120)")
    parser.add_argument("--settle-s", type=float, default=5.0, help="sampling after all are accepted (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
