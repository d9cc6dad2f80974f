"""An outage: N orders in flight, then for --down-s seconds every worker process is stopped
(--down workers, the default; the Supervisor stays up), or the Supervisor process is
(--down supervisor), or the state database takes no write (--down database); then it is back.

    python bench/outage.py --orders 10 --down-s 600
    python bench/outage.py --orders 10 --down-s 600 --down supervisor
    python bench/outage.py --orders 10 --down-s 600 --down database

The stack: Temporal dev server (in memory), remote services with fault injection,
``python worker.py`` (--workers of them) and ``python -m sas.supervisor``, all with the default
settings: the default ladder and complete-by, not the demo's short ones. A ``latency``
fault holds ``payment.charge`` for --latency-ms for exactly --orders calls, so every order
is in its charge step when the workers go (the fault's hit count says so). Each worker is
SIGKILLed with its process group, nothing runs for --down-s seconds, then the workers start
again. The bench waits until every order has ended (Processed or Compensated) or is parked
for an operator (Error), waits two more Supervisor intervals for late decisions and alerts,
and prints one line:

    orders=… completed=… compensated=… alerts=… decisions=… parked=… down_s=… settle_s=…

``completed`` + ``compensated`` + ``parked`` = ``orders``. An outage that is waited out, as
it should be, has compensated=0, parked=0 and no decisions. ``alerts`` and ``decisions`` count
every row the Supervisor wrote during the run (the store is fresh), including an alert about
the queue no worker polls. The script exits non-zero only if an order neither ends nor parks
within --settle-timeout-s of the restart.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from bench._stack import BenchStack, order_payload, poll, print_summary, sas_client, wait_log

# Where an order rests once the outage is over: ended, or waiting for an operator.
SETTLED = ("Processed", "Compensated", "Error")


@contextmanager
def hold_write_lock(db_url: str) -> Iterator[None]:
    db = sqlite3.connect(db_url.split(":///", 1)[1], isolation_level=None, timeout=60)
    try:
        db.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


async def task_states(sessions, task_ids: list[str]) -> dict[str, str]:
    from sqlalchemy import select

    from sas.state_store.mirror_tables import Task

    async with sessions() as session:
        rows = await session.execute(select(Task.task_id, Task.state).where(Task.task_id.in_(task_ids)))
        return {row.task_id: row.state for row in rows}


async def decision_kinds(sessions) -> dict[str, int]:
    from sqlalchemy import func, select

    from sas.state_store.tables import Decision

    async with sessions() as session:
        rows = await session.execute(select(Decision.kind, func.count()).group_by(Decision.kind))
        return {kind: int(n) for kind, n in rows}


async def count_rows(sessions, table) -> int:
    from sqlalchemy import func, select

    async with sessions() as session:
        return int((await session.scalar(select(func.count()).select_from(table))) or 0)


async def bench(args: argparse.Namespace) -> dict[str, object]:
    from sas import state_store
    from sas.settings import DatabaseSettings, Settings
    from sas.state_store.tables import Alert, Decision

    defaults = Settings()
    with BenchStack(keep=args.keep) as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=True)
        stack.migrate()
        workers = [stack.sas_worker(f"worker-{w}") for w in range(args.workers)]
        supervisor = stack.supervisor()
        for worker in workers:
            wait_log(worker, r"polling", 90)
        client = await sas_client(stack.temporal_address)
        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        run = uuid.uuid4().hex[:6]
        task_ids = [f"outage-{run}-{i}" for i in range(args.orders)]
        try:
            async with httpx.AsyncClient(base_url=stack.services_url, headers=stack.admin_headers, timeout=10) as http:
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
                for task_id, i in zip(task_ids, range(args.orders), strict=True):
                    await client.start_workflow(
                        "OrderWorkflow", order_payload(i), id=task_id, task_queue=defaults.temporal.task_queue
                    )

                async def hits() -> int:
                    rules = (await http.get("/admin/faults")).json()["faults"]
                    return next(r["hits"] for r in rules if r["id"] == fault)

                await poll(hits, lambda h: h >= args.orders, 120, 0.05, "every order to be in its charge step")

            print(f"{args.down} down for {args.down_s:g}s with {args.orders} orders in flight", flush=True)
            if args.down == "workers":
                for worker in workers:
                    worker.kill()  # SIGKILL to the worker's process group: nothing of it survives
                await asyncio.sleep(args.down_s)  # the outage itself: nothing to wait on but the clock
                workers = [stack.sas_worker(f"worker-{w}-again") for w in range(args.workers)]
                for worker in workers:
                    wait_log(worker, r"polling", 90)
            elif args.down == "supervisor":
                supervisor.kill()
                await asyncio.sleep(args.down_s)
                supervisor = stack.supervisor("supervisor-again", SAS_LOG_LEVEL="INFO")
                wait_log(supervisor, r"polling", 90)
            else:
                # The state store takes no write: one connection holds its write lock throughout
                # (the embedded SQLite store's way of being unreachable for everyone else).
                with hold_write_lock(stack.db_url):
                    await asyncio.sleep(args.down_s)
            restarted = time.monotonic()

            states = await poll(
                lambda: task_states(sessions, task_ids),
                lambda s: len(s) == args.orders and all(v in SETTLED for v in s.values()),
                args.settle_timeout_s,
                1.0,
                "every order to end or park",
            )
            settle_s = time.monotonic() - restarted
            # Late decisions and alerts count too: give the Supervisor two more sweeps.
            await asyncio.sleep(2 * defaults.supervisor.interval_s)
            alerts, decisions = await count_rows(sessions, Alert), await count_rows(sessions, Decision)
            kinds = await decision_kinds(sessions)
        finally:
            await engine.dispose()
    ended = list(states.values())
    return {
        "orders": args.orders,
        "completed": ended.count("Processed"),
        "compensated": ended.count("Compensated"),
        "alerts": alerts,
        "decisions": decisions,
        "parked": ended.count("Error"),
        # "wait" rows are looks the Supervisor put off (nothing signalled); the rest were acted on.
        "decision_kinds": ",".join(f"{k}:{n}" for k, n in sorted(kinds.items())) or "none",
        "down": args.down,
        "down_s": f"{args.down_s:g}",
        "settle_s": round(settle_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=10, help="orders in flight when the workers go (default 10)")
    parser.add_argument("--down-s", type=float, default=600, help="how long every worker stays down (default 600)")
    parser.add_argument(
        "--down",
        choices=("workers", "supervisor", "database"),
        default="workers",
        help="what goes: every worker process (killed), the Supervisor process (killed), or the state "
        "database (its write lock held by another connection); default workers",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--latency-ms", type=int, default=3000, help="how long the charge fault holds each call")
    parser.add_argument(
        "--settle-timeout-s", type=float, default=900, help="how long the orders may take to end after the restart"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    for name in ("orders", "workers"):
        if not 1 <= getattr(args, name) <= 10_000:
            parser.error(f"--{name} must be between 1 and 10000")
    if not 0 <= args.down_s <= 86_400:
        parser.error("--down-s must be between 0 and 86400")
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
