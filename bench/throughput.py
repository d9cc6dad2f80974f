"""Throughput of sas against a bare Temporal workflow making the same three remote calls.

    python bench/throughput.py --orders 200 --rounds 3

One run starts a Temporal dev server (in memory), the remote services, sas's own worker
(``python worker.py``, mirror on) and Supervisor (``python -m sas.supervisor``), and one
process per comparison design, each on its own task queue:

  bare      BenchBareOrder: three activities, no mirror (the baseline)
  bare-queues  BenchBareQueuesOrder: the baseline with sas's task-queue layout, each activity
            on its service's own queue with a worker per queue (what that layout costs
            Temporal and the worker, apart from the pattern)
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
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import BenchStack, median, order_payload, poll, print_summary, sas_client, wait_log

ALL = ["bare", "bare-queues", "sas", "sas-nosa", "la", "batch", "proj"]
DEFAULT = ["bare", "bare-queues", "sas", "sas-nosa", "la", "batch", "proj"]
WORKFLOW = {
    "bare": "BenchBareOrder",
    "bare-queues": "BenchBareQueuesOrder",
    "sas": "OrderWorkflow",
    "sas-nosa": "OrderWorkflow",
    "la": "BenchLaOrder",
    "batch": "BenchBatchOrder",
    "proj": "BenchBareOrder",
}
QUEUE = {
    "bare": "bench-bare",
    "bare-queues": "bench-bare-queues",
    "sas": "sas-tasks",
    "sas-nosa": "bench-sas-nosa",
    "la": "bench-la",
    "batch": "bench-batch",
    "proj": "bench-proj",
}


def cpu_s(pid: int, tid: int | None = None) -> float:
    try:
        stat = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone (a PostgreSQL backend whose connection closed)
        return 0.0
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks (100 Hz)


def thread_cpu_s(pid: int) -> dict[str, float]:
    """A worker's CPU by kind of thread: ``main`` (the event loop: activities, and workflow
    activations' payload visits), ``threads`` (Python threads: workflow activations, the SQLite
    writer), ``core`` (the SDK's Rust runtime: gRPC, protobuf, its state machines)."""
    out = {"main": 0.0, "threads": 0.0, "core": 0.0}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return out
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        kind = "main" if tid == pid else ("core" if comm.startswith(("tokio", "temporal")) else "threads")
        out[kind] += cpu_s(pid, tid)
    return out


async def pg_backends(sessions) -> list[int]:  # type: ignore[no-untyped-def]
    """The PostgreSQL server processes serving the bench's database (when it is on this machine):
    their CPU is part of what a design costs, and is on the same cores as everything else."""
    from sqlalchemy import text

    async with sessions() as session:
        rows = await session.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        )
        return [int(pid) for (pid,) in rows]


def start(stack: BenchStack, variants: list[str], search_attributes: bool, lean: bool) -> dict[str, list]:
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
            args = ["-m", "bench._worker", "bench", "--task-queue", QUEUE[v]]
            args += (["--no-mirror"] if v in ("bare", "bare-queues", "proj") else []) + (["--lean"] if lean else [])
            args += ["--service-queues"] if v == "bare-queues" else []
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
        procs = start(stack, variants, not args.no_search_attributes, args.lean_baseline)
        from sas import state_store
        from sas.settings import DatabaseSettings

        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        client = await sas_client(stack.temporal_address)
        server_pid = stack.group.children[0].process.pid
        services_pid = stack.group.children[1].process.pid
        postgres = not stack.db_url.startswith("sqlite")
        try:
            for v in variants:  # warm-up: imports, caches, connection pools, sticky queues
                await run_round(client, stack, v, args.warmup, f"{run}-w", sessions)
            wps: dict[str, list[float]] = {v: [] for v in variants}
            cpu: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            ms: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for r in range(args.rounds):
                order = variants[r % len(variants) :] + variants[: r % len(variants)]
                for v in order:
                    pids = {"server": server_pid, **{c.name: c.process.pid for c in procs[v]}}
                    # The remote services (and PostgreSQL) serve every design alike; shown so
                    # that the whole machine's CPU per order is accounted for.
                    pids["services"] = services_pid
                    backends = await pg_backends(sessions) if postgres else []
                    before = {k: cpu_s(p) for k, p in pids.items()}
                    before_pg = {p: cpu_s(p) for p in backends}
                    worker_pid = procs[v][0].process.pid
                    before_threads = thread_cpu_s(worker_pid)
                    t0 = time.monotonic()
                    spy = _profile(args.profile, v, r, procs[v][0].process.pid, args.profile_gil)
                    try:
                        w = await run_round(client, stack, v, args.orders, f"{run}-{r}", sessions)
                    finally:
                        _stop_profile(spy)
                    wall = time.monotonic() - t0
                    used = {k: cpu_s(p) - before[k] for k, p in pids.items()}
                    if postgres:
                        # Backends opened during the round count from zero; closed ones are lost.
                        after = await pg_backends(sessions)
                        used["postgres"] = sum(cpu_s(p) - before_pg.get(p, 0.0) for p in set(after) | set(backends))
                    # Threads that ended during the round are lost; the SDK's and the writer's live on.
                    by_thread = {
                        f"worker_{k}": round(1000 * (u - before_threads[k]) / args.orders, 1)
                        for k, u in thread_cpu_s(worker_pid).items()
                    }
                    wps[v].append(w)
                    cpu[v].append({k: round(u / wall, 2) for k, u in used.items()})
                    # CPU per order: what decides throughput on a machine whose cores are all busy,
                    # and far steadier than wall-clock rates on a shared one.
                    ms[v].append({**{k: round(1000 * u / args.orders, 1) for k, u in used.items()}, **by_thread})
                    print(
                        f"round {r} {v:9s} wps={w:6.1f} cpu_cores={cpu[v][-1]} cpu_ms_per_order={ms[v][-1]}", flush=True
                    )
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
            for v in variants:
                key = v.replace("-", "_")
                procs_ms = {k for round_ms in ms[v] for k in round_ms}
                for k in sorted(procs_ms):
                    name = "worker" if k.startswith("worker-") else k
                    out[f"{key}_{name}_ms"] = round(median([m.get(k, 0.0) for m in ms[v]]), 1)
            if args.json:
                Path(args.json).write_text(
                    json.dumps({"wps": wps, "cpu": cpu, "cpu_ms_per_order": ms, "summary": out}, indent=1)
                )
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
    parser.add_argument(
        "--lean-baseline",
        action="store_true",
        help="run the comparison designs' workers (bare, la, batch, proj) with the process-level savings sas's"
        " worker.py makes and a plain Temporal worker does not (sas's sandbox runner, gc.freeze()): shows how much"
        " of a ratio comes from those rather than from the pattern itself",
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
