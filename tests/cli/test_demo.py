"""`sas demo --exit` end to end: a real Temporal dev server, services, worker and Supervisor
as child processes; every order ends where its faults put it; nothing is left running."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from sas_runtime.processes import free_port, port_in_use


def survivors(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


async def test_demo_runs_every_order_to_its_expected_end_and_leaves_nothing_behind(tmp_path: Path) -> None:
    state_dir = tmp_path / "demo-state"
    ports = [free_port() for _ in range(3)]
    argv = [
        sys.executable,
        "-m",
        "sas_cli.main",
        "demo",
        "--orders",
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
    assert not survivors(str(state_dir)), survivors(str(state_dir))
    assert not any(port_in_use("127.0.0.1", p) for p in ports)
