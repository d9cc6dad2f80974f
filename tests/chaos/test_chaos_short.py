"""The short chaos run (bench/chaos.py): 40 orders, 20 chaos trips (a parallel group, an
approval, a timer and a condition: bench/_chaos_trip.py), 6 fan-outs and 6 parents of a child
task (bench/_chaos_shapes.py) through the real stack while the
worker is killed twice and the services, Temporal, the Supervisor and the database each fail
once; every invariant must hold, and every kind of trip stage must have been met. Needs
PostgreSQL (127.0.0.1:5432 or SAS_TEST_PG_URL)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres import PG_ADMIN_URL, require_postgres

# A whole stack in subprocesses, with faults, for a minute or two; one of the heaviest runs, which
# go one at a time on one worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("heavy")]

ROOT = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(
    r"^orders=(\d+) lost=(\d+) duplicates=(\d+) inconsistent=(\d+) mismatched=(\d+) left_behind=(\d+) trips=(\d+)"
    r" fan_outs=(\d+) parents=(\d+)(?: \S+=\S+)*$"
)


@pytest.mark.timeout(330)
def test_short_chaos_run_keeps_every_invariant() -> None:
    require_postgres()  # the chaos run makes its database unreachable, so it needs a real server
    argv = [
        sys.executable,
        str(ROOT / "bench" / "chaos.py"),
        "--orders",
        "40",
        "--trips",
        "20",
        "--fan-outs",
        "6",
        "--parents",
        "6",
        "--kills",
        "2",
        "--seed",
        "6",
        "--submit-s",
        "20",
        "--chaos-s",
        "30",
        "--timeout",
        "240",
        "--pg-url",
        PG_ADMIN_URL.replace("postgresql+asyncpg://", "postgresql://", 1),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"no output; stderr:\n{done.stderr[-3000:]}"
    match = LAST_LINE.match(lines[-1])
    assert match, f"unexpected last line {lines[-1]!r}; output:\n{output[-6000:]}"
    orders, lost, duplicates, inconsistent, mismatched, left_behind, trips, fan_outs, parents = map(int, match.groups())
    assert (orders, trips, fan_outs, parents) == (40, 20, 6, 6)
    assert (lost, duplicates, inconsistent, mismatched, left_behind) == (0, 0, 0, 0, 0), output[-6000:]
    # Every kind of trip stage was met: both siblings refused at once, both failing at once and
    # retried by the Supervisor, the hotel alone refused, approvals given (by update and by
    # signal), refused and left unanswered, the When both ways.
    figures = dict(f.split("=") for f in next(x for x in lines if x.startswith("trips: ")).split()[1:])
    kinds = ("both_siblings_refused", "both_siblings_failed_then_booked", "hotel_refused", "approved", "rejected")
    for kind in (*kinds, "silent", "insured"):
        assert int(figures[kind]) >= 1, (kind, figures)
    assert int(figures["approvals_by_update"]) >= 1 and int(figures["approvals_by_signal"]) >= 1, figures
    assert int(figures["insure_skipped"]) >= 1, figures
    # The fan-outs paid and refunded items, and a parent's child completed.
    shapes = dict(f.split("=") for f in next(x for x in lines if x.startswith("shapes: ")).split()[1:])
    for kind in ("payments", "refunds", "children_processed"):
        assert int(shapes[kind]) >= 1, (kind, shapes)
    # Every process fault happened: two kills, and one each of the others.
    assert "worker_kills=2" in lines[-1] and "process_faults=6" in lines[-1], lines[-1]
    assert done.returncode == 0, output[-6000:]
