"""Throughput of sas against bare Temporal workflows making the same three remote calls.

    python bench/throughput.py --orders 200 --rounds 5 --variants bare,bare-queues,sas

One run starts a Temporal dev server (in memory), the remote services, sas's own worker
(``python worker.py``, mirror on) and Supervisor (``python -m sas.supervisor``), and one
process per comparison design, each on its own task queue (the designs: bench/_designs.py).

Each round submits N orders at once to one design and times submission to the last
completion; designs alternate within a round (their order rotates between rounds). Before each
round every process (server, services, every design's) is let settle back to the CPU rate it
had idle after the warm-up (``idle_cores=``), for up to ``--settle-timeout-s``: what a round
leaves behind (the server's visibility and clean-up tasks) is otherwise read as the next
round's, whichever design that is (``settle_s_max=``, the longest wait).

The gate: ``ratio=`` is sas against ``bare-queues``, the bare workflow on sas's own
task-queue layout, as the median of the per-round ratios (each round runs the designs back to
back, under the same background load). ``bare_ratio=`` is sas against plain ``bare``: what the
layout and the pattern cost together. Every other design has ``<design>_ratio`` against
bare-queues and ``<design>_bare_ratio`` against bare; ``bare_queues_ratio`` is bare-queues
against bare (what the layout alone costs). CPU per order is printed by process and by worker
thread kind (``<design>_<process>_ms``), in all (``<design>_total_ms``), and as ``cpu_ratio=``,
bare-queues' total over sas's (median of the rounds): what the gate would read on a machine these
processes had to themselves, far steadier than wall-clock rates when it is shared.
``cpu_sas_over_bare=`` is sas's total CPU per order over plain bare's, per round, as the median
of the rounds. Ends with one line of key=value figures.
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

from bench._cpu import cpu_s, pg_backends, start_profile, stop_profile, thread_cpu_s
from bench._designs import ALL, completed, start, start_order
from bench._stack import BenchStack, median, poll, print_summary, sas_client

BASELINES = ["bare", "bare-queues"]  # always run: the gate and the full cost are measured against them


async def run_round(client, stack: BenchStack, variant: str, n: int, tag: str, sessions) -> float:
    prefix = f"{variant}-{tag}-"
    sem = asyncio.Semaphore(64)

    async def submit(i: int):
        async with sem:
            return await start_order(client, variant, i, f"{prefix}{i}")

    started = time.monotonic()
    handles = await asyncio.gather(*(submit(i) for i in range(n)))
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=600)
    bad = [r for r in results if not completed(r)]
    if bad:
        raise RuntimeError(f"{variant}: {len(bad)} orders did not complete: {bad[:3]}")
    if variant == "proj":
        from sqlalchemy import func, select

        from sas.state_store.mirror_tables import Task

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


def stack_pids(stack: BenchStack, procs) -> list[int]:
    """Every process a round's CPU is read from: the server, the services and each design's."""
    return [stack.group.children[0].process.pid, stack.group.children[1].process.pid] + [
        c.process.pid for children in procs.values() for c in children
    ]


async def busy_cores(pids: list[int], window_s: float) -> float:
    """How many cores these processes kept busy over the next ``window_s`` seconds."""
    before = sum(cpu_s(p) for p in pids)
    await asyncio.sleep(window_s)
    return (sum(cpu_s(p) for p in pids) - before) / window_s


async def settled(pids: list[int], idle: float, timeout_s: float) -> float:
    """Wait until the processes are back to their idle rate, so that the work a round leaves
    behind (the server's visibility and clean-up tasks, a store's checkpoint) is not read as the
    next round's, whichever design that is. Returns the seconds waited (``timeout_s`` at most)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await busy_cores(pids, 0.5) <= max(2 * idle, idle + 0.05):
            break
    return round(time.monotonic() - started, 1)


async def measure(client, stack: BenchStack, procs, sessions, variant: str, tag: str, args) -> tuple[float, dict]:
    """One measured round of one design: its rate, and CPU per order by process and thread kind."""
    args.settle_s.append(await settled(stack_pids(stack, procs), args.idle_cores, args.settle_timeout_s))
    server_pid = stack.group.children[0].process.pid
    # The remote services (and PostgreSQL) serve every design alike; shown so that the whole
    # machine's CPU per order is accounted for.
    pids = {"server": server_pid, **{c.name: c.process.pid for c in procs[variant]}}
    pids["services"] = stack.group.children[1].process.pid
    postgres = not stack.db_url.startswith("sqlite")
    backends = await pg_backends(sessions) if postgres else []
    before = {k: cpu_s(p) for k, p in pids.items()}
    before_pg = {p: cpu_s(p) for p in backends}
    worker_pid = procs[variant][0].process.pid
    before_threads = thread_cpu_s(worker_pid)
    spy = start_profile(args.profile, f"{variant}-{tag}", worker_pid, args.profile_gil)
    try:
        w = await run_round(client, stack, variant, args.orders, tag, sessions)
    finally:
        stop_profile(spy)
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
    # CPU per order: what decides throughput on a machine whose cores are all busy, and far
    # steadier than wall-clock rates on a shared one.
    return w, {**{k: round(1000 * u / args.orders, 1) for k, u in used.items()}, **by_thread}


def ratios(wps: dict[str, list[float]], design: str, baseline: str) -> tuple[float, list[float]]:
    """The median of a design's per-round ratios to a baseline, and those ratios. Each round runs
    every design back to back, so a round's ratio compares runs under the same background load;
    their median resists a noisy machine better than a ratio of medians from different moments."""
    per_round = [round(a / b, 3) for a, b in zip(wps[design], wps[baseline], strict=True)]
    return round(median(per_round), 3), per_round


def total_ms(per_order: dict[str, float]) -> float:
    """The CPU an order cost every process of its design (server, worker, services, PostgreSQL…);
    the ``worker_<thread kind>`` entries split the worker's and are not added again."""
    return sum(ms for k, ms in per_order.items() if not k.startswith("worker_"))


def summarise(args: argparse.Namespace, variants: list[str], wps: dict, ms: dict) -> dict[str, object]:
    out: dict[str, object] = {"orders": args.orders, "rounds": args.rounds, "load_avg_start": args.load_avg_start}
    out["idle_cores"] = args.idle_cores
    out["settle_s_max"] = max(args.settle_s, default=0.0)
    for v in variants:
        out[f"{v.replace('-', '_')}_wps"] = round(median(wps[v]), 1)
    out["ratio"], gate = ratios(wps, "sas", "bare-queues") if "sas" in variants else (float("nan"), [])
    out["bare_ratio"], full = ratios(wps, "sas", "bare") if "sas" in variants else (float("nan"), [])
    out["bare_queues_ratio"], layout = ratios(wps, "bare-queues", "bare")
    print(f"sas/bare-queues per round {gate}; sas/bare {full}; bare-queues/bare {layout}", flush=True)
    if "sas" in variants:
        # On a shared machine the wall-clock rates swing with the others' load, while CPU per order
        # holds steady: bare-queues' total CPU per order over sas's, per round, is the throughput
        # ratio a machine saturated by these processes alone would give. Shown beside the gate.
        per_round_cpu = [round(total_ms(b) / total_ms(a), 3) for a, b in zip(ms["sas"], ms["bare-queues"], strict=True)]
        out["cpu_ratio"] = round(median(per_round_cpu), 3)
        print(f"bare-queues/sas total CPU per order, per round {per_round_cpu}", flush=True)
        # Issue 48's reading: what an order costs every process with sas, over what it costs with
        # plain bare, per round (the two back to back), as the median of the rounds.
        over_bare = [round(total_ms(a) / total_ms(b), 3) for a, b in zip(ms["sas"], ms["bare"], strict=True)]
        out["cpu_sas_over_bare"] = round(median(over_bare), 3)
        print(f"sas/bare total CPU per order, per round {over_bare}", flush=True)
    for v in variants:
        if v not in ("sas", *BASELINES):
            key = v.replace("-", "_")
            out[f"{key}_ratio"], per_round = ratios(wps, v, "bare-queues")
            out[f"{key}_bare_ratio"], _ = ratios(wps, v, "bare")
            print(f"{v}/bare-queues per round {per_round}", flush=True)
    for v in variants:
        key = v.replace("-", "_")
        out[f"{key}_total_ms"] = round(median([total_ms(m) for m in ms[v]]), 1)
        for k in sorted({k for round_ms in ms[v] for k in round_ms}):
            name = "worker" if k.startswith("worker-") else k
            out[f"{key}_{name}_ms"] = round(median([m.get(k, 0.0) for m in ms[v]]), 1)
    return out


async def bench(args: argparse.Namespace) -> dict[str, object]:
    variants = [v for v in ALL if v in args.variants or v in BASELINES]
    run = uuid.uuid4().hex[:6]
    args.load_avg_start = round(os.getloadavg()[0], 2)  # how shared the machine was, for the record
    with BenchStack(keep=args.keep) as stack:
        if args.database_url:
            stack.db_url = args.database_url
        procs = start(stack, variants, not args.no_search_attributes, args.lean_baseline)
        from sas import state_store
        from sas.settings import DatabaseSettings

        engine = state_store.create_engine(DatabaseSettings(url=stack.db_url))
        sessions = state_store.session_factory(engine)
        client = await sas_client(stack.temporal_address)
        try:
            for v in variants:  # warm-up: imports, caches, connection pools, sticky queues
                await run_round(client, stack, v, args.warmup, f"{run}-w", sessions)
            # What every process costs with nothing to do (pollers, the Supervisor's sweeps): the
            # rate each round waits to be back to before it starts.
            await asyncio.sleep(args.settle_timeout_s / 3)
            args.idle_cores = round(await busy_cores(stack_pids(stack, procs), 2.0), 3)
            args.settle_s = []
            wps: dict[str, list[float]] = {v: [] for v in variants}
            ms: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for r in range(args.rounds):
                for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
                    w, per_order = await measure(client, stack, procs, sessions, v, f"{run}-{r}", args)
                    wps[v].append(w)
                    ms[v].append(per_order)
                    settle = args.settle_s[-1]
                    print(f"round {r} {v:11s} settled={settle}s wps={w:6.1f} cpu_ms_per_order={per_order}", flush=True)
            out = summarise(args, variants, wps, ms)
            if args.json:
                Path(args.json).write_text(json.dumps({"wps": wps, "cpu_ms_per_order": ms, "summary": out}, indent=1))
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
        default=",".join(ALL),
        help=f"comma-separated designs from {','.join(ALL)} (default all; bare and bare-queues always run)",
    )
    parser.add_argument(
        "--settle-timeout-s",
        type=float,
        default=15.0,
        help="before each round, wait up to this long for every process to be back to its idle CPU rate (default 15)",
    )
    parser.add_argument("--database-url", help="state store URL (default: SQLite in the run's temporary directory)")
    parser.add_argument(
        "--no-search-attributes",
        action="store_true",
        help="start the dev server without sas's search attributes (the sas worker then skips upserts)",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy each measured round's worker into DIR (raw stacks)")
    parser.add_argument(
        "--profile-gil", action="store_true", help="with --profile: sample only the thread holding the GIL"
    )
    parser.add_argument(
        "--lean-baseline",
        action="store_true",
        help="run the comparison designs' workers (bare, bare-queues, la, batch, proj) with the process-level savings sas's"
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
