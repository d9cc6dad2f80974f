"""Recovery after a crashed worker: kill -9 the worker while 50 orders are mid-step,
restart it, and time until all of them have completed.

    python bench/recovery.py --orders 50

The stack: Temporal dev server (in memory), remote services with fault injection,
``python worker.py`` and ``python -m sas.supervisor`` with the default settings (complete-by
10 s, heartbeat timeout complete-by/3, Supervisor interval 5 s). A ``latency`` fault
holds ``payment.charge`` for --latency-ms for exactly --orders calls, so every order is
in its charge step when the worker is killed (the fault's hit count says so). The
worker is SIGKILLed (with its process group) and restarted at once. Recovery is the
time from the kill to the last order's completion; the bound is complete-by + one
Supervisor interval + 5 s. Every order must end Processed with exactly one charge in
the services' ledger. Runs --runs times on the same stack and reports the median.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._stack import BenchStack, order_payload, poll, print_summary, sas_client, wait_log


async def one_run(stack: BenchStack, client, worker, args, run: str):
    async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
        await http.delete("/admin/faults")
        fault = (
            await http.post(
                "/admin/faults",
                json={
                    "endpoint": "payment.charge",
                    "kind": "latency",
                    "latency_ms": args.latency_ms,
                    "times": args.orders,
                },
            )
        ).json()["id"]
        handles = await asyncio.gather(
            *(
                client.start_workflow("OrderWorkflow", order_payload(i), id=f"rec-{run}-{i}", task_queue="sas-tasks")
                for i in range(args.orders)
            )
        )

        async def hits() -> int:
            rules = (await http.get("/admin/faults")).json()["faults"]
            return next(r["hits"] for r in rules if r["id"] == fault)

        await poll(hits, lambda h: h >= args.orders, 120, 0.05, "every order to be in its charge step")
        killed = time.monotonic()
        worker.kill()  # SIGKILL to the worker's process group
        worker = stack.sas_worker(f"worker-{run}")  # its own log: "polling" is looked for in it
        ready_s = wait_log(worker, r"polling", 60)
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=300)
        recovery = time.monotonic() - killed
        bad = [r for r in results if r["state"] != "Processed"]
        if bad:
            raise RuntimeError(f"{len(bad)} orders did not complete: {bad[:2]}")
        for i in range(args.orders):
            entries = (await http.get("/ledger", params={"order_id": f"rec-{run}-{i}"})).json()["entries"]
            keys = [e["idempotency_key"] for e in entries]
            if len(keys) != len(set(keys)) or len(keys) != 3:
                raise RuntimeError(f"order rec-{run}-{i}: ledger keys {keys}")
    return worker, recovery, ready_s


async def bench(args: argparse.Namespace) -> dict[str, object]:
    with BenchStack(keep=args.keep) as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=True)
        stack.migrate()
        worker = stack.sas_worker("worker")
        stack.supervisor()
        wait_log(worker, r"polling", 90)
        client = await sas_client(stack.temporal_address)
        from sas.settings import Settings

        s = Settings()
        complete_by, interval = s.default_step.complete_by_s, s.supervisor.interval_s
        bound = complete_by + interval + 5
        run = uuid.uuid4().hex[:6]
        recoveries, readies = [], []
        for r in range(args.runs):
            worker, recovery, ready_s = await one_run(stack, client, worker, args, f"{run}-{r}")
            recoveries.append(recovery)
            readies.append(ready_s)
            print(f"run {r}: recovery_s={recovery:.2f} worker_ready_s={ready_s:.2f}", flush=True)
        rec = statistics.median(recoveries)
        return {
            "orders": args.orders,
            "runs": args.runs,
            "recovery_s": round(rec, 2),
            "bound_s": round(bound, 1),
            "max_recovery_s": round(max(recoveries), 2),
            "restart_ready_s": round(statistics.median(readies), 2),
            "complete_by_s": complete_by,
            "heartbeat_s": round(s.default_step.heartbeat.total_seconds(), 2),
            "supervisor_interval_s": interval,
            "met": rec <= bound,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3, help="kill/restart cycles; the median counts (default 3)")
    parser.add_argument("--latency-ms", type=int, default=3000, help="how long the charge fault holds each call")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
