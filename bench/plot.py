"""Plot the figures of ``bench/throughput.py --json`` and ``bench/sweep.py --json``.

    python bench/plot.py --throughput tp.json --sweep sweep.json --out docs/benchmarks_summary.png

Left: median workflows/s per design, with each round as a dot and the 0.9 x bare goal.
Right: sweep time (median ms) against step rows on each backend (log x). Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--throughput", required=True)
    parser.add_argument("--sweep", required=True)
    parser.add_argument("--out", default="docs/benchmarks_summary.png")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tp = json.loads(Path(args.throughput).read_text())["wps"]
    sweep = json.loads(Path(args.sweep).read_text())
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = list(tp)
    medians = [statistics.median(tp[n]) for n in names]
    left.bar(names, medians, color=["#888" if n == "bare" else "#3b7dd8" for n in names])
    for i, n in enumerate(names):
        left.scatter([i] * len(tp[n]), tp[n], color="k", s=10, zorder=3)
        if n != "bare":
            left.text(i, medians[i], f"{medians[i] / medians[0]:.2f}x", ha="center", va="bottom")
    left.axhline(0.9 * medians[0], color="r", ls="--", lw=1, label="goal: 0.9 x bare")
    left.set_ylabel("workflows / s (median)")
    left.set_title("Throughput per mirror design, same server and run")
    left.legend()
    for backend, figures in sweep.items():
        sizes = [(int(float(k[1:])), v * 1000) for k, v in figures.items() if k.startswith("t")]
        right.plot(
            [s for s, _ in sizes],
            [t for _, t in sizes],
            marker="o",
            label=f"{backend} (growth {figures['growth']:.2f}x)",
        )
    right.set_xscale("log")
    right.set_ylim(bottom=0)
    right.set_xlabel("step rows stored")
    right.set_ylabel("sweep scan, ms (median)")
    right.set_title("Supervisor sweep vs rows stored (100 due)")
    right.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
