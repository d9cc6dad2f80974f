"""Latency of one order under a steady load: sas against the bare workflow.

    python bench/latency.py --rounds 3 --duration-s 40

One run starts the stack of bench/throughput.py with the designs asked for (default
``bare,bare-queues,sas``; bench/_designs.py). Unless ``--rate`` is given, it first measures
the peak of the first baseline asked for (``bare``, else ``bare-queues``: a burst of
``--peak-orders`` submitted at once, as a throughput round) and offers every design
``--fraction`` of it (default half).

Each round offers each design in turn (their order rotates between rounds) the same steady
load for ``--duration-s``: order i is started at t0 + i/rate whatever happened to the others
(an open loop, so a slow design cannot slow its own load down), and its latency runs from
that planned start to the moment the client sees its result. The figures are p50, p95 and p99
over every order of every round, per design, and sas's as a multiple of plain bare's, the
saga a team would write by hand (``p50_bare_ratio``...; goal: p50 at most 1.1 x, p99 at most
1.2 x), and of bare-queues' (``p50_ratio``..., the same workflow on per-service queues). Ends
with one line of key=value figures.

``--breakdown K`` also reads the history of every K-th order of each round and prints where its
time went (bench/_breakdown.py: workflow tasks waiting and running, activities waiting and
running, each in turn), and adds each design's medians to the line (``sas_wft_wait_ms``...).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _breakdown
from bench._designs import ALL, completed, start, start_order
from bench._stack import BenchStack, print_summary, sas_client

PERCENTILES = (50, 95, 99)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p% of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def order_id(variant: str, tag: str, i: int) -> str:
    """The workflow id of a design's i-th order of a burst or round (``--breakdown`` reads it back)."""
    return f"{variant}-{tag}-{i}"


async def burst(client, variant: str, n: int, tag: str) -> float:  # type: ignore[no-untyped-def]
    """Submit n orders at once and wait for them all; returns orders per second (the peak)."""
    started = time.monotonic()
    handles = await asyncio.gather(*(start_order(client, variant, i, order_id(variant, tag, i)) for i in range(n)))
    results = await asyncio.gather(*(h.result() for h in handles))
    if not all(completed(r) for r in results):
        raise RuntimeError(f"{variant}: not every order of the burst completed")
    return n / (time.monotonic() - started)


async def steady(client, variant: str, rate: float, duration_s: float, tag: str) -> list[float]:  # type: ignore[no-untyped-def]
    """Offer ``rate`` orders per second for ``duration_s``; returns each order's latency in ms."""
    n = max(1, round(rate * duration_s))
    t0 = time.monotonic() + 0.1

    async def one(i: int) -> float:
        planned = t0 + i / rate
        await asyncio.sleep(max(0.0, planned - time.monotonic()))
        handle = await start_order(client, variant, i, order_id(variant, tag, i))
        result = await handle.result()
        if not completed(result):
            raise RuntimeError(f"{variant}: order {i} did not complete: {result!r}")
        # From the planned start: a late submission (the bench's own loop busy) counts against
        # the design rather than hiding a queue.
        return 1000 * (time.monotonic() - planned)

    return list(await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), timeout=duration_s + 600))


async def bench(args: argparse.Namespace) -> dict[str, object]:
    variants = [v for v in ALL if v in args.variants]
    run = uuid.uuid4().hex[:6]
    load = os.getloadavg()[0]
    with BenchStack(keep=args.keep) as stack:
        if args.database_url:
            stack.db_url = args.database_url
        start(stack, variants)
        client = await sas_client(stack.temporal_address)
        for v in variants:  # warm-up: imports, caches, connection pools, sticky queues
            await burst(client, v, args.warmup, f"{run}-w")
        peak = None
        baseline = "bare" if "bare" in variants else "bare-queues"
        if args.rate is None:
            peak = await burst(client, baseline, args.peak_orders, f"{run}-peak")
            print(f"{baseline} peak {peak:.1f} orders/s", flush=True)
        rate = args.rate or args.fraction * (peak or 0.0)
        latencies: dict[str, list[float]] = {v: [] for v in variants}
        parts: dict[str, list[_breakdown.Breakdown]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
                tag = f"{run}-{r}"
                got = await steady(client, v, rate, args.duration_s, tag)
                latencies[v] += got
                figures = " ".join(f"p{p}={percentile(got, p):.0f}ms" for p in PERCENTILES)
                print(f"round {r} {v:11s} orders={len(got)} {figures}", flush=True)
                if args.breakdown:
                    ids = [order_id(v, tag, i) for i in range(0, len(got), args.breakdown)]
                    found = await _breakdown.sample(client, ids)
                    parts[v] += found
                    print(f"  where the time went, ms: {_breakdown.line(found)}", flush=True)
    out: dict[str, object] = {"rounds": args.rounds, "duration_s": args.duration_s, "rate": round(rate, 2)}
    if peak is not None:
        out[f"{baseline.replace('-', '_')}_peak_wps"] = round(peak, 1)
    out["load_avg_start"] = round(load, 2)
    for v in variants:
        key = v.replace("-", "_")
        out[f"{key}_orders"] = len(latencies[v])
        for p in PERCENTILES:
            out[f"{key}_p{p}_ms"] = round(percentile(latencies[v], p), 1)
        if parts[v]:
            medians = _breakdown.medians(parts[v])
            out.update({f"{key}_{part}_ms": round(medians[part], 1) for part in _breakdown.PARTS})
    for base, suffix in (("bare", "_bare_ratio"), ("bare-queues", "_ratio")):
        if "sas" in variants and base in variants:
            for p in PERCENTILES:
                out[f"p{p}{suffix}"] = round(percentile(latencies["sas"], p) / percentile(latencies[base], p), 3)
    if args.json:
        Path(args.json).write_text(json.dumps({"latency_ms": latencies, "summary": out}, indent=1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each offers every design the load once")
    parser.add_argument("--duration-s", type=float, default=40.0, help="seconds of steady load per design and round")
    parser.add_argument("--rate", type=float, help="orders per second offered (default: --fraction of the peak)")
    parser.add_argument("--fraction", type=float, default=0.5, help="of the baseline's measured peak (default 0.5)")
    parser.add_argument("--peak-orders", type=int, default=200, help="orders in the burst that measures the peak")
    parser.add_argument("--warmup", type=int, default=20, help="orders per design before measuring (default 20)")
    parser.add_argument(
        "--variants", default="bare,bare-queues,sas", help=f"comma-separated designs from {','.join(ALL)}"
    )
    parser.add_argument(
        "--breakdown", type=int, default=0, metavar="K", help="read every K-th order's history: where its time went"
    )
    parser.add_argument("--database-url", help="state store URL (default: SQLite in the run's temporary directory)")
    parser.add_argument("--json", help="also write every order's latency to this file (for bench/plot.py)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory with the logs")
    args = parser.parse_args()
    args.variants = args.variants.split(",")
    unknown = set(args.variants) - set(ALL)
    if unknown:
        parser.error(f"unknown designs {sorted(unknown)}; choose from {ALL}")
    if args.breakdown < 0:
        parser.error("--breakdown takes 0 (off) or K >= 1: every K-th order's history is read")
    if args.rate is None and not {"bare", "bare-queues"} & set(args.variants):
        parser.error("without --rate the load is a fraction of a baseline's peak: include bare or bare-queues")
    print_summary(asyncio.run(bench(args)))


if __name__ == "__main__":
    main()
