"""Plot the figures of ``bench/throughput.py --json``, ``bench/latency.py --json`` and ``bench/sweep.py --json``.

    python bench/plot.py --throughput tp.json --latency lat.json --sweep sweep.json --out docs/benchmarks_summary.png

Throughput: median workflows/s per design, each round as a dot, each design's median per-round
ratio to bare-queues above its bar, and the gate: 0.9 x bare-queues, the bare workflow
on sas's own task-queue layout. Latency: p50, p95 and p99 per design, with sas's goals (p50 at
most 1.2 x bare-queues', p99 at most 1.5 x). Sweep: time (median ms) against step rows on each
backend (log x). Each panel is drawn only when its file is given. Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

GATE = 0.9  # sas / bare-queues throughput
LATENCY_GOALS = {50: 1.2, 99: 1.5}  # sas / bare-queues latency, at most


def throughput(ax: Any, tp: dict[str, list[float]]) -> None:
    names = list(tp)
    medians = [statistics.median(tp[n]) for n in names]
    base = tp.get("bare-queues")
    colours = {"bare": "#aaa", "bare-queues": "#666"}
    ax.bar(names, medians, color=[colours.get(n, "#3b7dd8") for n in names])
    for i, n in enumerate(names):
        ax.scatter([i] * len(tp[n]), tp[n], color="k", s=10, zorder=3)
        if base and n != "bare-queues":
            ratio = statistics.median(a / b for a, b in zip(tp[n], base, strict=True))
            ax.text(i, medians[i], f"{ratio:.2f}x", ha="center", va="bottom")
    if base:
        ax.axhline(GATE * statistics.median(base), color="r", ls="--", lw=1, label=f"gate: {GATE} x bare-queues")
        ax.legend(loc="lower right")
    ax.set_ylabel("workflows / s (median)")
    ax.set_title("Throughput (ratio to bare-queues, median of rounds)")
    ax.tick_params(axis="x", labelrotation=20)


def latency(ax: Any, lat: dict[str, list[float]]) -> None:
    names = list(lat)
    width = 0.8 / 3
    for j, p in enumerate((50, 95, 99)):
        values = [_percentile(lat[n], p) for n in names]
        xs = [i + (j - 1) * width for i in range(len(names))]
        ax.bar(xs, values, width, label=f"p{p}")
    if "bare-queues" in lat:
        for p, goal in LATENCY_GOALS.items():
            ax.axhline(goal * _percentile(lat["bare-queues"], p), ls="--", lw=1, color="r" if p == 50 else "m")
            ax.text(
                len(names) - 0.6, goal * _percentile(lat["bare-queues"], p), f"sas p{p} goal", va="bottom", ha="right"
            )
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("start to completion, ms")
    ax.set_title("Latency under a steady load")
    ax.legend(loc="upper left")


def sweep(ax: Any, figures_by_backend: dict[str, dict[str, float]]) -> None:
    for backend, figures in figures_by_backend.items():
        sizes = [(int(float(k[1:])), v * 1000) for k, v in figures.items() if k.startswith("t")]
        ax.plot(
            [s for s, _ in sizes],
            [t for _, t in sizes],
            marker="o",
            label=f"{backend} (growth {figures['growth']:.2f}x)",
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("step rows stored")
    ax.set_ylabel("sweep scan, ms (median)")
    ax.set_title("Supervisor sweep vs rows stored (100 due)")
    ax.legend()


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]  # nearest rank, as bench/latency.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--throughput", help="bench/throughput.py --json output")
    parser.add_argument("--latency", help="bench/latency.py --json output")
    parser.add_argument("--sweep", help="bench/sweep.py --json output")
    parser.add_argument("--out", default="docs/benchmarks_summary.png")
    args = parser.parse_args()
    panels = [
        (draw, json.loads(Path(path).read_text()))
        for draw, path in ((throughput, args.throughput), (latency, args.latency), (sweep, args.sweep))
        if path
    ]
    if not panels:
        parser.error("give at least one of --throughput, --latency, --sweep")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (draw, data) in zip(axes[0], panels, strict=True):
        if draw is throughput:
            data = data["wps"]
        elif draw is latency:
            data = data["latency_ms"]
        draw(ax, data)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
