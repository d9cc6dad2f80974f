"""Lean start-up: how long ``python worker.py`` takes until it polls, and what its
imports cost.

    python bench/startup.py --runs 5

Starts a Temporal dev server and the remote services, migrates a fresh state store once,
then starts ``python worker.py`` --runs times, timing from the spawn to its log line
"worker ... polling" (each run migrates — a no-op at head — and connects, as in
production), and stops it with SIGTERM. Also times, in a fresh interpreter, the imports
the worker makes (``-X importtime``, the heaviest top-level packages listed).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import ROOT, BenchStack, print_summary, wait_log

WORKER_IMPORTS = (
    "import httpx, temporalio.worker, state_store, activities, workflows, sas.runtime.connect, "
    "sas.runtime.search_attributes, settings"
)


def import_profile() -> tuple[float, list[tuple[str, float]]]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", WORKER_IMPORTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    per_top: Counter[str] = Counter()
    total = 0.0
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not m:
            continue
        self_us, cumulative_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
        per_top[name.split(".")[0]] += self_us
        if indent == 1:
            total += cumulative_us
    return total / 1e6, [(k, round(v / 1e6, 3)) for k, v in per_top.most_common(8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with BenchStack() as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=False)
        stack.migrate()
        times = []
        for r in range(args.runs):
            started = time.monotonic()
            worker = stack.sas_worker(f"worker-{r}")
            wait_log(worker, r"worker \S+ polling", 120)
            times.append(time.monotonic() - started)
            worker.stop()
            print(f"run {r}: ready_s={times[-1]:.2f}", flush=True)
    import_s, heavy = import_profile()
    print("heaviest imports (self time, s): " + ", ".join(f"{k}={v}" for k, v in heavy), flush=True)
    print_summary(
        {
            "runs": args.runs,
            "ready_s": f"{statistics.median(times):.2f}",
            "max_ready_s": f"{max(times):.2f}",
            "import_s": f"{import_s:.2f}",
        }
    )


if __name__ == "__main__":
    main()
