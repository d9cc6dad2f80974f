"""Where one design's worker spends CPU beyond another's, from ``bench/throughput.py --profile DIR``.

    python bench/throughput.py --orders 200 --rounds 2 --variants bare,bare-queues,sas --profile prof
    python bench/profile_diff.py prof --orders 200 --design sas --base bare-queues

py-spy samples each measured round's worker 100 times a second (raw stacks, one file per design
and round: ``<design>-<run>-<round>.txt``). This prints the worker CPU per order by role (mirror
writes, workflow start, activation, payload visits, activities, thread hand-offs: ROLES), then per
function as self time (the sampled frame was this function) and as inclusive time (this function
was on the stack), each design's and the difference, largest first: the worker's
share of what the design costs beyond the base. A sample is 10 ms of one thread, so the figures
are per thread; the SDK's Rust threads show as Python only where they call into Python.
Ends with one line of key=value figures.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import print_summary

SAMPLE_MS = 10.0  # py-spy --rate 100
# Where a thread waits rather than works. py-spy counts a thread as busy while the OS says it
# can run, which on a loaded machine includes a thread just woken and not yet on a core, so
# these leaves show how often threads wake, not CPU spent: left out unless --keep-idle.
IDLE_LEAVES = (
    "EpollSelector.select (",
    "_worker (concurrent/futures/thread.py:81)",  # an executor thread waiting for work
    "Condition.wait (",
    "Thread._wait_for_tstate_lock (",
)
_LOCATION = re.compile(r" \((?:[^()]*/)?(?P<file>[^/()]+):\d+\)$")

# What a sample was doing, by the first role (in this order) whose pattern is on its stack: the
# two designs name their own code differently (sas's Agents and runner against the bench's plain
# activities and the stock sandbox runner), so roles compare where single functions cannot.
ROLES = (
    ("mirror writes", re.compile(r"sas/state_store/|aiosqlite|asyncpg|sqlalchemy")),
    ("workflow start (sandbox instance)", re.compile(r"\.create_instance \(|_create_workflow_instance \(")),
    ("workflow activation", re.compile(r"\.activate \(")),
    ("payload visits (encode/decode)", re.compile(r"_command_aware_visitor|visit_payloads|/converter\.py")),
    ("activities (remote calls)", re.compile(r"temporalio/worker/_activity\.py|sas/activities/|bench/_activities")),
    ("thread hand-offs", re.compile(r"call_soon_threadsafe|run_in_executor|_write_to_self|_read_from_self")),
    ("SDK bridge calls", re.compile(r"temporalio/bridge/")),
)


def role(raw: list[str]) -> str:
    return next((name for name, rx in ROLES if any(rx.search(f) for f in raw)), "other")


def frame_name(frame: str) -> str:
    """``fn (path/to/mod.py:12)`` -> ``fn (mod.py)``: lines apart, one function is one entry."""
    return _LOCATION.sub(lambda m: f" ({m.group('file')})", frame.strip())


def load(folder: Path, design: str, keep_idle: bool = False) -> tuple[Counter[str], Counter[str], Counter[str], int]:
    """Self, inclusive and per-role samples over every round of a design, and the rounds."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    roles: Counter[str] = Counter()
    files = sorted(folder.glob(f"{design}-*.txt"))
    # "bare-…" must not pick up "bare-queues-…" files.
    files = [f for f in files if not f.name[len(design) + 1 :].startswith(("queues-", "nosa-"))]
    for path in files:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            raw = [f for f in stack.split(";") if f.strip()]
            if not raw or (not keep_idle and raw[-1].startswith(IDLE_LEAVES)):
                continue
            frames = [frame_name(f) for f in raw]
            roles[role(raw)] += int(count)
            own[frames[-1]] += int(count)
            for name in set(frames):
                inclusive[name] += int(count)
    return own, inclusive, roles, len(files)


def per_order(samples: Counter[str], rounds: int, orders: int) -> dict[str, float]:
    return {k: SAMPLE_MS * v / (rounds * orders) for k, v in samples.items()}


def table(title: str, design: dict[str, float], base: dict[str, float], top: int, names: tuple[str, str]) -> None:
    diff = {k: design.get(k, 0.0) - base.get(k, 0.0) for k in set(design) | set(base)}
    print(f"\n{title}: worker ms per order ({names[0]} vs {names[1]}), largest difference first")
    print(f"{'diff':>7} {names[0]:>9} {names[1]:>11}  function")
    for k, d in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{d:7.2f} {design.get(k, 0.0):9.2f} {base.get(k, 0.0):11.2f}  {k[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the --profile DIR of bench/throughput.py")
    parser.add_argument("--orders", type=int, required=True, help="orders per round, as the throughput run")
    parser.add_argument("--design", default="sas")
    parser.add_argument("--base", default="bare-queues")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep-idle", action="store_true", help="count samples of threads waiting (IDLE_LEAVES)")
    args = parser.parse_args()
    d_own, d_inc, d_roles, d_rounds = load(args.folder, args.design, args.keep_idle)
    b_own, b_inc, b_roles, b_rounds = load(args.folder, args.base, args.keep_idle)
    if not d_rounds or not b_rounds:
        parser.error(f"no profiles of {args.design} or {args.base} in {args.folder}")
    names = (args.design, args.base)
    table("by role", per_order(d_roles, d_rounds, args.orders), per_order(b_roles, b_rounds, args.orders), 99, names)
    table("self", per_order(d_own, d_rounds, args.orders), per_order(b_own, b_rounds, args.orders), args.top, names)
    table(
        "inclusive", per_order(d_inc, d_rounds, args.orders), per_order(b_inc, b_rounds, args.orders), args.top, names
    )
    d_total = SAMPLE_MS * sum(d_own.values()) / (d_rounds * args.orders)
    b_total = SAMPLE_MS * sum(b_own.values()) / (b_rounds * args.orders)
    key_d, key_b = (n.replace("-", "_") for n in names)
    print_summary(
        {
            "rounds": d_rounds,
            f"{key_d}_sampled_ms": round(d_total, 2),
            f"{key_b}_sampled_ms": round(b_total, 2),
            "extra_ms": round(d_total - b_total, 2),
        },
        hard_exit=False,
    )


if __name__ == "__main__":
    main()
