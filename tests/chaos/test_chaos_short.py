"""The short chaos run (bench/chaos.py): 40 orders through the real stack while the worker
is killed twice and the services, Temporal, the Supervisor and the database each fail once;
every invariant must hold. Needs PostgreSQL (127.0.0.1:5432 or SAS_TEST_PG_URL)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres import PG_ADMIN_URL, require_postgres

pytestmark = pytest.mark.slow  # a whole stack in subprocesses, with faults, for a minute or two

ROOT = Path(__file__).resolve().parents[2]
LAST_LINE = re.compile(r"^orders=(\d+) lost=(\d+) duplicates=(\d+) inconsistent=(\d+) mismatched=(\d+)(?: \S+=\S+)*$")


@pytest.mark.timeout(330)
def test_short_chaos_run_keeps_every_invariant() -> None:
    require_postgres()  # the chaos run makes its database unreachable, so it needs a real server
    argv = [
        sys.executable,
        str(ROOT / "bench" / "chaos.py"),
        "--orders",
        "40",
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
    orders, lost, duplicates, inconsistent, mismatched = map(int, match.groups())
    assert orders == 40
    assert (lost, duplicates, inconsistent, mismatched) == (0, 0, 0, 0), output[-6000:]
    # Every process fault happened: two kills, and one each of the others.
    assert "worker_kills=2" in lines[-1] and "process_faults=6" in lines[-1], lines[-1]
    assert done.returncode == 0, output[-6000:]
