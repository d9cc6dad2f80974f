"""``sas show`` of a fan-out task of 1,000 items: how long the command takes, as an operator runs
it, against a bare Python start in the same run.

    python bench/show_latency.py                       # 1,000 items, 20 runs, SQLite and PostgreSQL
    python bench/show_latency.py --backends sqlite --runs 50

For each backend: a fresh state store, migrated, holds the rows a ``payroll_batch`` task of
``--items`` items leaves once done (bench/fan_out.py runs a real one): its task row with the
items in its input, its one fan-out step, written through the state store's own writers as the
Scheduler writes it (accepted, Processing, the items' counts once per wave, Processed). Then
``--runs`` times, interleaved so that a load that comes and goes weighs on both alike:
``python -c pass`` (the interpreter's own start, the floor of any command) and ``sas show ID``
(the ``sas`` script of this environment, a fresh process each time), spawn to exit. Printed:
the median and p90 of each, wall-clock and CPU (user + system, which a busy machine inflates
less), the ratio of the medians, the command's read of the state store alone, timed in this
process (``show_read_s``), and its imports (``-X importtime``, the heaviest top-level packages).

Every run is checked: exit 0, the items summarised by state on the step's line
("1000 items: 1000 processed"), and no item of the thousand named (no row per item).

Compiled modules are cached first (one run allowed to write them, whatever
PYTHONDONTWRITEBYTECODE says), as they are in any installed copy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stack import install_signal_exit, print_summary
from bench.fan_out import show_read_s
from bench.startup import sas_command
from bench.sweep import create_pg_database, drop_pg_database

GOAL_S = 1.0
TASK_ID = "payroll-batch-1"
# Items arrive in waves of this many (bench/_payroll.py: 50 at once, 200 a batch, so one batch a
# wave); the step's row carries the counts after each.
WAVE = 200


def item_key(i: int) -> str:
    return f"recipient-{i:05d}"


async def write_fan_out_task(url: str, items: int) -> None:
    """The rows of a done fan-out task of ``items`` items, written as the Scheduler writes them."""
    from sas.settings import DatabaseSettings
    from sas.state_store.agent_writes import make_step_writer
    from sas.state_store.engine import create_engine, session_factory
    from sas.state_store.mirror import record_transitions
    from sas.task_models import StepPlan, StepPolicyValues, StepState, StepTransition, TaskAccepted, TaskState
    from sas.task_models.fanout import ItemOutcome
    from sas.task_models.versions import version_of
    from sas.task_types.fan_out import Tolerance
    from sas.workflows.core.fanout import FanOutTally, keyed_items

    db = DatabaseSettings(url=url)
    chain = uuid.uuid4().hex
    started = datetime.now(UTC) - timedelta(minutes=5)
    recipients = [{"id": item_key(i), "cents": 100 + i} for i in range(items)]
    writer = make_step_writer(db)
    try:
        accepted = await writer.accept(
            TaskAccepted(
                chain_id=chain,
                run_id=chain,
                task_id=TASK_ID,
                task_type="payroll_batch",
                workflow_type="PayrollBatchWorkflow",
                task_queue="sas-tasks",
                payload={"recipients": recipients},
                accepted_at=started,
                steps=[
                    StepPlan(
                        name="pay",
                        position=0,
                        agent="payroll.post:/payroll/pay",
                        compensation="payroll.refund",
                        idempotency_key=f"{TASK_ID}:pay",
                        policy=StepPolicyValues(),
                    )
                ],
            )
        )
        assert accepted.status == "new", accepted
    finally:
        await writer.aclose()

    keyed = keyed_items(recipients, lambda item: item["id"])
    assert not isinstance(keyed, str), keyed
    tally = FanOutTally(total=items, tolerance=Tolerance())

    def write(seq: int, state: StepState, task_state: TaskState | None, result: Any = None) -> StepTransition:
        return StepTransition(
            task_id=TASK_ID,
            step="pay",
            version=version_of(seq),
            state=state,
            at=started + timedelta(seconds=seq),
            task_state=task_state,
            run_id=chain,
            chain_id=chain,
            note=tally.describe(),
            result=result,
        )

    transitions = [write(1, StepState.PROCESSING, TaskState.PROCESSING)]
    for start in range(0, items, WAVE):
        tally.take([ItemOutcome(key=item.key, state="processed") for item in keyed[start : start + WAVE]])
        transitions.append(write(len(transitions) + 1, StepState.PROCESSING, None))
    transitions.append(write(len(transitions) + 1, StepState.PROCESSED, TaskState.PROCESSED, dict(tally.counts())))
    engine = create_engine(db)
    try:
        for transition in transitions:  # one transaction each, as the Scheduler writes them
            async with session_factory(engine)() as session:
                await record_transitions(session, [transition])
                await session.commit()
    finally:
        await engine.dispose()


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall-clock seconds, CPU seconds (user + system) and stdout of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def check_summarised(shown: str, items: int) -> None:
    """The items are counted by state on the step's line; none of them is listed."""
    assert f"{items} items: {items} processed" in " ".join(shown.split()), shown
    named = [item_key(i) for i in range(items) if item_key(i) in shown]
    assert not named, f"`sas show` lists {len(named)} items, e.g. {named[:3]}"


def p90(values: list[float]) -> float:
    """The nearest-rank 90th percentile."""
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * 9 // 10) - 1)]


def import_profile(env: dict[str, str]) -> tuple[float, list[tuple[str, float]]]:
    """Seconds ``sas show`` spends importing, and the top-level packages that take most (self time)."""
    script = "from sas.cli.main import main; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", script, "show", TASK_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    per_top: Counter[str] = Counter()
    total = 0
    for m in re.finditer(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$", done.stderr, re.M):
        per_top[m[4].split(".")[0]] += int(m[1])
        if len(m[3]) == 1:
            total += int(m[2])
    return total / 1e6, [(name, us / 1e6) for name, us in per_top.most_common(6)]


def bench_backend(backend: str, args: argparse.Namespace) -> dict[str, float]:
    from sas import state_store

    tmp = Path(tempfile.mkdtemp(prefix="sas-show-"))
    pg_name = None
    try:
        if backend == "sqlite":
            url = f"sqlite+aiosqlite:///{tmp / 'state.db'}"
        else:
            pg_name, url = asyncio.run(create_pg_database(args.pg_admin_url))
        state_store.upgrade(url)
        asyncio.run(write_fan_out_task(url, args.items))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"SAS_DATABASE__URL": url, "SAS_LOG_LEVEL": "WARNING", "COLUMNS": "100"}
        show = [*sas_command(), "show", TASK_ID]
        baseline = [sys.executable, "-c", "pass"]
        for argv in (show, [*show, "--json"], baseline):  # caches the compiled modules; checks both forms
            _, _, shown = timed(argv, env)
            if argv is not baseline:
                check_summarised(shown, args.items)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # the runs leave nothing behind
        walls: dict[str, list[float]] = {"python": [], "show": []}
        cpus: dict[str, list[float]] = {"python": [], "show": []}
        for _ in range(args.runs):
            for name, argv in (("python", baseline), ("show", show)):
                wall, cpu, shown = timed(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
                if name == "show":
                    check_summarised(shown, args.items)
        read_s = asyncio.run(show_read_s(url, TASK_ID))
        imports_s, heavy = import_profile(env)
    finally:
        if pg_name:
            asyncio.run(drop_pg_database(args.pg_admin_url, pg_name))
        shutil.rmtree(tmp, ignore_errors=True)
    out: dict[str, float] = {}
    for name in walls:
        out[f"{name}_median_s"] = statistics.median(walls[name])
        out[f"{name}_p90_s"] = p90(walls[name])
        out[f"{name}_cpu_s"] = statistics.median(cpus[name])
    out |= {"ratio": out["show_median_s"] / out["python_median_s"], "read_s": read_s, "imports_s": imports_s}
    print(f"\n{backend}: `sas show` of a task of {args.items} items, {args.runs} runs each", flush=True)
    print(f"  {'':24} {'median s':>9} {'p90 s':>9} {'CPU s':>9}")
    for name, label in (("python", "python -c pass"), ("show", "sas show ID")):
        print(f"  {label:24} {out[f'{name}_median_s']:9.3f} {out[f'{name}_p90_s']:9.3f} {out[f'{name}_cpu_s']:9.3f}")
    verdict = "under" if out["show_median_s"] < GOAL_S else "over"
    print(f"  ratio of the medians {out['ratio']:.1f}; {verdict} the {GOAL_S:g} s goal; its read {read_s:.3f} s,")
    print(f"  its imports {imports_s:.3f} s (self time: " + ", ".join(f"{k} {v:.3f}" for k, v in heavy) + ")")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1000, help="the fan-out's items (default 1000)")
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--backends", default="sqlite,postgres", help="sqlite, postgres or both (default)")
    parser.add_argument(
        "--pg-admin-url",
        default=os.environ.get("SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    install_signal_exit()
    summary: dict[str, object] = {"items": args.items, "runs": args.runs}
    results = {}
    for backend in args.backends.split(","):
        if backend not in ("sqlite", "postgres"):
            parser.error(f"unknown backend {backend!r}")
        results[backend] = bench_backend(backend, args)
        summary |= {f"{backend}_{k}": round(v, 3) for k, v in results[backend].items()}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print_summary(summary, hard_exit=False)


if __name__ == "__main__":
    main()
