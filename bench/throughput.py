"""Throughput of sas against a bare Temporal workflow making the same three remote calls.

    python bench/throughput.py --orders 200 --rounds 3

One run starts a Temporal dev server (in memory), the remote services, sas's own worker
(``python worker.py``, mirror on) and Supervisor (``python -m sas.supervisor``), and one
process per comparison design, each on its own task queue:

  bare      BenchBareOrder: three activities, no mirror (the baseline)
  sas       OrderWorkflow on ``python worker.py``: design (b), the Agents write Processing
            and Processed themselves, local activities only for accept and failures;
            search-attribute upserts on (the dev server has them registered)
  sas-nosa  the same worker code with the search-attribute upserts off
  la        design (a): one local activity per transition (BenchLaOrder)
  batch     design (c): transitions batched per workflow task (BenchBatchOrder)
  proj      design (d): BenchBareOrder, the mirror written by a projector that tails
            the histories (bench/_projector.py); a round ends when the mirror shows
            every task Processed, not just when the workflows end

Each round submits N orders at once to one design and times submission to the last
completion; designs alternate within a round (their order rotates between rounds).
The figures are medians over the rounds; a design's ratio is the median of its per-round
ratios to bare (each round runs the designs back to back; the ratio of medians is printed too). Ends with one line of key=value figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import BenchStack, median, order_payload, poll, print_summary, sas_client, wait_log

ALL = ["bare", "sas", "sas-nosa", "la", "batch", "proj"]
DEFAULT = ["bare", "sas", "sas-nosa", "la", "batch", "proj"]
WORKFLOW = {
    "bare": "BenchBareOrder",
    "sas": "OrderWorkflow",
    "sas-nosa": "OrderWorkflow",
    "la": "BenchLaOrder",
    "batch": "BenchBatchOrder",
    "proj": "BenchBareOrder",
}
QUEUE = {
    "bare": "bench-bare",
    "sas": "sas-tasks",
    "sas-nosa": "bench-sas-nosa",
    "la": "bench-la",
    "batch": "bench-batch",
    "proj": "bench-proj",
}


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks (100 Hz)


def start(stack: BenchStack, variants: list[str], search_attributes: bool) -> dict[str, list]:
    """Start every process; returns, per design, the children whose CPU counts for it."""
    stack.start_temporal(search_attributes=search_attributes)
    stack.start_services(enable_faults=False)
    stack.migrate()
    procs: dict[str, list] = {}
    ready = []
    for v in variants:
        if v == "sas":
            procs[v] = [stack.sas_worker("worker-sas")]
        elif v == "sas-nosa":
            procs[v] = [
                stack.python(
                    "worker-sas-nosa", ["-m", "bench._worker", "sas-variant"], SAS_TEMPORAL__TASK_QUEUE=QUEUE[v]
                )
            ]
        else:
            args = ["-m", "bench._worker", "bench", "--task-queue", QUEUE[v]] + (
                ["--no-mirror"] if v in ("bare", "proj") else []
            )
            procs[v] = [stack.python(f"worker-{v}", args)]
        if v == "proj":
            procs[v].append(stack.python("projector", ["-m", "bench._projector", "--task-queue", QUEUE[v]]))
        ready += procs[v]
    if any(v.startswith("sas") for v in variants):
        sup = stack.supervisor()
        for v in variants:
            if v.startswith("sas"):
                procs[v].append(sup)
    for child in ready:
        wait_log(child, r"polling", 90)
    return procs


async def run_round(client, stack: BenchStack, variant: str, n: int, tag: str, sessions) -> float:
    prefix = f"{variant}-{tag}-"
    sem = asyncio.Semaphore(64)

    async def submit(i: int):
        async with sem:
            return await client.start_workflow(
                WORKFLOW[variant], order_payload(i), id=f"{prefix}{i}", task_queue=QUEUE[variant]
            )

    started = time.monotonic()
    handles = await asyncio.gather(*(submit(i) for i in range(n)))
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=600)
    bad = [r for r in results if (r.get("state") if isinstance(r, dict) else r) != "Processed"]
    if bad:
        raise RuntimeError(f"{variant}: {len(bad)} orders did not complete: {bad[:3]}")
    if variant == "proj":
        from sqlalchemy import func, select

        from sas.state_store.tables import Task

        async def projected() -> int:
            async with sessions() as session:
                return int(
                    await session.scalar(
                        select(func.count())
                        .select_from(Task)
                        .where(Task.task_id.like(f"{prefix}%"), Task.state == "Processed")
                    )
                    or 0
                )

        await poll(projected, lambda c: c >= n, 300, 0.05, "the projector to catch up")
    return n / (time.monotonic() - started)


def _profile(folder: str | None, variant: str, r: int, pid: int, gil: bool = False):
    """py-spy (if asked for) on the design's worker during a measured round: raw stacks,
    only of the thread holding the GIL with ``gil`` (what limits a Python worker)."""
    if not folder:
        return None
    import shutil

    from sas.runtime.processes import spawn

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return spawn(
        f"py-spy-{variant}-{r}",
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "100",
            "--nonblocking",
            *(["--gil"] if gil else []),
            "-o",
            str(Path(folder) / f"{variant}-{r}.txt"),
        ],
        Path(folder) / f"{variant}-{r}.py-spy.log",
    )


def _stop_profile(spy) -> None:
    import signal
    import subprocess

    if spy is not None:
        spy.send(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy.process.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()


async def bench(args: argparse.Namespace) -> dict[str, object]:
    variants = [v for v in ALL if v in args.variants]
    if "bare" not in variants:
        variants.insert(0, "bare")
    run = uuid.uuid4().hex[:6]
    with BenchStack(keep=args.keep) as stack:
        if args.database_url:
            stack.db_url = args.database_url
        procs = start(stack, variants, not args.no_search_attributes)
        from sas import state_store
        from sas.settings import DatabaseSettings

        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        client = await sas_client(stack.temporal_address)
        server_pid = stack.group.children[0].process.pid
        try:
            for v in variants:  # warm-up: imports, caches, connection pools, sticky queues
                await run_round(client, stack, v, args.warmup, f"{run}-w", sessions)
            wps: dict[str, list[float]] = {v: [] for v in variants}
            cpu: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for r in range(args.rounds):
                order = variants[r % len(variants) :] + variants[: r % len(variants)]
                for v in order:
                    pids = {"server": server_pid, **{c.name: c.process.pid for c in procs[v]}}
                    before = {k: cpu_s(p) for k, p in pids.items()}
                    t0 = time.monotonic()
                    spy = _profile(args.profile, v, r, procs[v][0].process.pid, args.profile_gil)
                    try:
                        w = await run_round(client, stack, v, args.orders, f"{run}-{r}", sessions)
                    finally:
                        _stop_profile(spy)
                    wall = time.monotonic() - t0
                    wps[v].append(w)
                    cpu[v].append({k: round((cpu_s(p) - before[k]) / wall, 2) for k, p in pids.items()})
                    print(f"round {r} {v:9s} wps={w:6.1f} cpu_cores={cpu[v][-1]}", flush=True)
            out: dict[str, object] = {"orders": args.orders, "rounds": args.rounds}
            bare = median(wps["bare"])
            for v in variants:
                key = v.replace("-", "_")
                out[f"{key}_wps"] = round(median(wps[v]), 1)
                if v != "bare":
                    # Each round runs every design back to back, so a round's ratio compares runs
                    # under the same background load; their median resists a noisy machine better
                    # than a ratio of medians taken from different moments.
                    per_round = [round(a / b, 3) for a, b in zip(wps[v], wps["bare"], strict=False)]
                    out[f"{key}_ratio" if v != "sas" else "ratio"] = round(median(per_round), 3)
                    out[f"{key}_ratio_of_medians"] = round(median(wps[v]) / bare, 3)
                    print(f"{v}: per-round ratios {per_round}", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"wps": wps, "cpu": cpu, "summary": out}, indent=1))
            return out
        finally:
            await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", type=int, default=200, help="orders per round and design (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every design once (default 3)")
    parser.add_argument("--warmup", type=int, default=20, help="orders per design before measuring (default 20)")
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT),
        help=f"comma-separated designs from {','.join(ALL)} (default {','.join(DEFAULT)})",
    )
    parser.add_argument("--database-url", help="state store URL (default: SQLite in the run's temporary directory)")
    parser.add_argument(
        "--no-search-attributes",
        action="store_true",
        help="start the dev server without sas's search attributes (the sas worker then skips upserts)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy each measured round's worker into DIR (collapsed stacks)"
    )
    parser.add_argument(
        "--profile-gil", action="store_true", help="with --profile: sample only the thread holding the GIL"
    )
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    args.variants = args.variants.split(",")
    unknown = set(args.variants) - set(ALL)
    if unknown:
        parser.error(f"unknown designs {sorted(unknown)}; choose from {ALL}")
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
