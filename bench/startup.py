"""Start-up: how long the ``sas`` CLI takes to answer ``--help`` and ``--version``,
and, with ``--worker``, how long ``python worker.py`` takes until it polls.

    python bench/startup.py                 # the CLI: median of 10 runs of each command
    python bench/startup.py --runs 20
    python bench/startup.py --worker --worker-runs 5

The CLI figures are each command run as a user runs it (the ``sas`` script of this
environment, a fresh process each time), from spawn to exit: wall-clock time, and the CPU the
process used (user + system), which a busy machine inflates less. The goal is 0.3 s of wall
time for each. ``tests/cli/test_startup_imports.py`` keeps the heavy modules out of them.

The worker figure starts a Temporal dev server and the remote services, migrates a fresh state
store once, then starts ``python worker.py`` ``--worker-runs`` times, timing from the spawn to
its log line "worker ... polling" (each run migrates - a no-op at head - and connects, as in
production), and stops it with SIGTERM. It also times, in a fresh interpreter, the imports the
worker makes (``-X importtime``, the heaviest top-level packages listed).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CLI_COMMANDS = (("--help",), ("submit", "--help"), ("--version",))
GOAL_S = 0.3
WORKER_IMPORTS = "import sas.worker, sas.runtime.connect, sas.runtime.search_attributes, sas.settings"


def sas_command() -> list[str]:
    """The installed ``sas`` script next to this interpreter, else the module (a source tree)."""
    script = Path(sys.executable).parent / "sas"
    found = str(script) if script.exists() else shutil.which("sas")
    return [found] if found else [sys.executable, "-m", "sas.cli.main"]


def time_command(argv: list[str]) -> tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=os.environ)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cli_figures(runs: int) -> dict[str, str]:
    base = sas_command()
    time_command([*base, "--version"])  # warm the file cache and the compiled modules
    figures: dict[str, str] = {}
    for args in CLI_COMMANDS:
        walls, cpus = zip(*(time_command([*base, *args]) for _ in range(runs)), strict=True)
        name = "sas_" + "_".join(a.strip("-") for a in args)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        figures[f"{name}_s"] = f"{wall:.3f}"
        figures[f"{name}_cpu_s"] = f"{cpu:.3f}"
        verdict = "ok" if wall <= GOAL_S else f"over the {GOAL_S} s goal"
        print(f"sas {' '.join(args)}: median of {runs}: {wall:.3f} s wall, {cpu:.3f} s CPU ({verdict})", flush=True)
    return figures


def import_profile() -> tuple[float, list[tuple[str, float]]]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", WORKER_IMPORTS],
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


def worker_figures(runs: int) -> dict[str, str]:
    from bench._stack import BenchStack, wait_log

    with BenchStack() as stack:
        stack.start_temporal()
        stack.start_services(enable_faults=False)
        stack.migrate()
        times = []
        for r in range(runs):
            started = time.monotonic()
            worker = stack.sas_worker(f"worker-{r}")
            wait_log(worker, r"worker \S+ polling", 120)
            times.append(time.monotonic() - started)
            worker.stop()
            print(f"run {r}: ready_s={times[-1]:.2f}", flush=True)
    import_s, heavy = import_profile()
    print("heaviest imports (self time, s): " + ", ".join(f"{k}={v}" for k, v in heavy), flush=True)
    return {
        "worker_runs": str(runs),
        "ready_s": f"{statistics.median(times):.2f}",
        "max_ready_s": f"{max(times):.2f}",
        "import_s": f"{import_s:.2f}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="Runs of each CLI command (the median is shown).")
    parser.add_argument("--worker", action="store_true", help="Also time the worker's start-up (starts a stack).")
    parser.add_argument("--worker-runs", type=int, default=5)
    args = parser.parse_args()
    figures = cli_figures(args.runs)
    if args.worker:
        figures |= worker_figures(args.worker_runs)
    from bench._stack import print_summary

    print_summary(figures, hard_exit=args.worker)


if __name__ == "__main__":
    main()
