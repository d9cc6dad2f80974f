"""Fair shares and priority on one shared queue: does one team's burst hold another team's task?

    python bench/fairness.py --backlog 5000 --priority-backlog 1000

One run starts a Temporal dev server (in memory, with sas's dynamic config: fairness on, one
partition a queue), the payroll service (bench/_payroll_service.py, a fast loopback service),
one sas worker (``python worker.py``) and no Supervisor, then, each through sas's one start path
(``sas.client.submitting.start``):

1. **unloaded**: team B's single task alone, three times; its time from submit to completion
   (the median) is ``unloaded_s``;
2. **baseline** (no fairness keys: the types name no team): team A submits ``--backlog``
   one-step tasks, then team B submits one; B's time from submit to completion is
   ``baseline_b_s``, ``baseline_n`` = that / ``unloaded_s``, ``baseline_b_waiting`` how many of
   A's were still open when B's was started and ``baseline_b_after`` how many of A's completed
   before B's did;
3. **fair** (each type names its team, so its tasks carry the team as their fairness key): the
   same, ``fair_b_s``, ``fair_n``, ``fair_b_after``;
4. **priority**: ``--priority-backlog`` tasks of the default priority (3), then one of priority 1;
   ``urgent_after`` is how many of the backlog completed before it (``urgent_backlog`` were still
   waiting when it was submitted).

``--no-fairness`` runs 1, 2 and 4 alone; ``--no-baseline`` skips 2. Each part waits for its
backlog to drain before the next starts. Ends with one line of key=value figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# This process starts the tasks itself: it must know the bench's types, as the worker does.
os.environ.setdefault("SAS_TASK_TYPES__MODULES", "bench._fair_types")

from bench._fair_types import TYPES  # noqa: E402
from bench._stack import BenchStack, median, print_summary, sas_client, wait_log  # noqa: E402
from bench.fan_out import wait_log_ready  # noqa: E402
from sas_demo_services.launcher import free_port  # noqa: E402

QUEUE = "sas-tasks"
IN_FLIGHT = 64  # starts at once while a backlog is submitted


class Run:
    def __init__(self, client: Any, tag: str) -> None:
        self.client, self.tag, self.n = client, tag, 0

    async def start(self, task_type: str, priority: int | None = None) -> tuple[str, float]:
        """Start one task through sas's start path; its id and the monotonic time it was started."""
        from sas.client.inputs import check_priority
        from sas.client.submitting import start

        self.n += 1
        task_id = f"{task_type}-{self.tag}-{self.n}"
        payload = {"id": task_id, "cents": 100}
        began = time.monotonic()
        if not await start(self.client, QUEUE, task_type, task_id, payload, priority=check_priority(priority)):
            raise RuntimeError(f"{task_id} was not started")
        return task_id, began

    async def done(self, task_id: str) -> datetime:
        """Wait for the task; when Temporal closed it."""
        handle = self.client.get_workflow_handle(task_id)
        result = await handle.result()
        if result["state"] != "Processed":
            raise RuntimeError(f"{task_id} ended {result['state']}")
        closed = (await handle.describe()).close_time
        assert closed is not None
        return closed

    async def backlog(self, task_type: str, count: int) -> list[str]:
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def one() -> str:
            async with slots:
                return (await self.start(task_type))[0]

        return await asyncio.gather(*(one() for _ in range(count)))

    async def closed_before(self, task_type: str, when: datetime) -> int:
        """How many tasks of ``task_type`` started under this tag had completed before ``when``."""
        query = (
            f"ExecutionStatus = 'Completed' AND CloseTime < '{when.isoformat()}'"
            f" AND WorkflowId STARTS_WITH '{task_type}-{self.tag}-'"
        )
        return (await self.client.count_workflows(query)).count

    async def open_now(self, task_type: str) -> int:
        query = f"ExecutionStatus = 'Running' AND WorkflowId STARTS_WITH '{task_type}-{self.tag}-'"
        return (await self.client.count_workflows(query)).count


async def alone(run: Run, task_type: str, times: int = 3) -> float:
    took = []
    for _ in range(times):
        task_id, began = await run.start(task_type)
        await run.done(task_id)
        took.append(time.monotonic() - began)
    return median(took)


async def behind_a_backlog(run: Run, a_type: str, b_type: str, count: int, priority: int | None = None) -> dict:
    """``count`` tasks of ``a_type``, then one of ``b_type``: how long it took, how many of the
    backlog were still open when it was started and how many had completed before it."""
    run.tag = uuid.uuid4().hex[:6]
    submit_began = time.monotonic()
    backlog = await run.backlog(a_type, count)
    submitted_s = time.monotonic() - submit_began
    waiting = await run.open_now(a_type)
    task_id, began = await run.start(b_type, priority)
    closed = await run.done(task_id)
    took = time.monotonic() - began
    after = await run.closed_before(a_type, closed)
    # Said before the drain, which at thousands takes long: B's figures are all in by now.
    print(f"{b_type}: {took:.2f}s behind {waiting} waiting, {after} completed before it", flush=True)
    drain_began = time.monotonic()
    # Counted, not each awaited: thousands of long polls for results would load the server more
    # than the backlog itself does.
    while await run.open_now(a_type):
        await asyncio.sleep(1.0)
    if await run.closed_before(a_type, datetime.now(UTC)) != len(backlog):
        raise RuntimeError(f"not every one of the {len(backlog)} {a_type} tasks completed")
    return {
        "s": round(took, 2),
        "after": after,
        "waiting": waiting,
        "submit_s": round(submitted_s, 1),
        "drain_s": round(time.monotonic() - drain_began, 1),
    }


async def measure(stack: BenchStack, args: argparse.Namespace) -> dict[str, Any]:
    client = await sas_client(stack.temporal_address)
    run = Run(client, uuid.uuid4().hex[:6])
    figures: dict[str, Any] = {"backlog": args.backlog, "load_avg_start": args.load_avg_start}
    await alone(run, "plain_b", 2)  # warm-up: imports, caches, the first run of each workflow
    await alone(run, "team_b.fair", 2)
    unloaded = await alone(run, "team_b.fair" if not args.no_fairness else "plain_b")
    figures["unloaded_s"] = round(unloaded, 3)
    print(f"unloaded: {unloaded:.3f}s", flush=True)
    modes = [] if args.no_baseline else [("baseline", "plain_a", "plain_b")]
    modes += [] if args.no_fairness else [("fair", "team_a.fair", "team_b.fair")]
    for mode, a_type, b_type in modes:
        found = await behind_a_backlog(run, a_type, b_type, args.backlog)
        print(f"{mode}: {found}", flush=True)
        figures |= {f"{mode}_b_{k}": v for k, v in found.items()}
        figures[f"{mode}_n"] = round(found["s"] / unloaded, 1)
    if args.priority_backlog:
        found = await behind_a_backlog(run, "plain_a", "plain_b", args.priority_backlog, priority=1)
        print(f"priority: {found}", flush=True)
        figures |= {
            "urgent_backlog": args.priority_backlog,
            "urgent_waiting": found["waiting"],
            "urgent_after": found["after"],
            "urgent_s": found["s"],
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=5000, help="team A's tasks before team B's one (default 5000)")
    parser.add_argument(
        "--priority-backlog", type=int, default=1000, help="tasks before the urgent one (default 1000; 0: skip)"
    )
    parser.add_argument("--no-fairness", action="store_true", help="only the baseline: no type names a team")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline (no fairness keys)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    args.load_avg_start = Path("/proc/loadavg").read_text().split()[0]
    with BenchStack(keep=args.keep) as stack:
        stack.start_temporal()
        stack.migrate()
        port = free_port()
        stack.python("payroll", ["-m", "bench._payroll_service", "--port", str(port)])
        wait_log_ready(port)
        worker = stack.sas_worker(
            "worker",
            SAS_TASK_TYPES__MODULES="bench._fair_types",
            SAS_TASK_TYPES__RUN=",".join(TYPES),
            SAS_SERVICES__PAYROLL__URL=f"http://127.0.0.1:{port}",
        )
        wait_log(worker, r"polling", 90)
        figures = asyncio.run(measure(stack, args))
    print_summary(figures)


if __name__ == "__main__":
    main()
