"""`sas demo --exit` end to end: a real Temporal dev server, services, worker and Supervisor
as child processes; every order ends where its faults put it; nothing is left running."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sas.cli.demo_plan import check_ledger
from sas.runtime.processes import port_in_use
from sas_demo_services.launcher import free_port
from sas_demo_services.ledger import read_ledger
from sas_orders.demo import UNDO_ACTIONS, plan

pytestmark = pytest.mark.slow  # `sas demo`: a whole stack in subprocesses


def survivors(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


async def test_demo_runs_every_order_to_its_expected_end_and_leaves_nothing_behind(tmp_path: Path) -> None:
    state_dir = tmp_path / "demo-state"
    ports = [free_port() for _ in range(3)]
    argv = [
        sys.executable,
        "-m",
        "sas.cli.main",
        "demo",
        "--tasks",
        "10",
        "--exit",
        "--timeout",
        "240",
        "--state-dir",
        str(state_dir),
        "--temporal-port",
        str(ports[0]),
        "--ui-port",
        str(ports[1]),
        "--services-port",
        str(ports[2]),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=400, env={**env, "COLUMNS": "200"}, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "all 10 orders ended where their faults put them" in done.stdout
    for label in ("completed", "compensated", "waiting for an operator", "cool-down", "cleaned up by the Supervisor"):
        assert label in done.stdout
    assert (state_dir / "temporal.db").exists() and (state_dir / "state.db").exists()
    # Not on the demo's word: where each order ended, read back from the state store and the
    # services' ledger it left behind (check_ledger has tests of its own in test_demo_check.py).
    with sqlite3.connect(f"{(state_dir / 'state.db').as_uri()}?mode=ro", uri=True) as db:
        ended = dict(db.execute("SELECT task_id, state FROM tasks WHERE task_id LIKE 'demo-%'").fetchall())
    cases = {case.name: case for case in plan(10).cases}
    by_case = {task_id.split("-", 3)[3]: (task_id, state) for task_id, state in ended.items()}
    assert sorted(by_case) == sorted(cases) and len(ended) == 10, ended
    for name, (task_id, state) in by_case.items():
        assert state == cases[name].expected, (task_id, state)
        entries = [entry.model_dump() for entry in read_ledger(str(state_dir / "ledger.db"), order_id=task_id)]
        assert check_ledger(state, entries, UNDO_ACTIONS) == [], (task_id, entries)
    assert not survivors(str(state_dir)), survivors(str(state_dir))
    assert not any(port_in_use("127.0.0.1", p) for p in ports)
