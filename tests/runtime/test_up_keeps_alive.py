"""``sas up`` as a user runs it, a real process with its whole stack: a worker killed under it is
started again with one line; a worker that keeps dying stops the stack with one line naming it
and its log; SIGTERM stops everything, and no process of the stack outlives ``sas up``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from sas_demo_services.launcher import free_port
from tests.helpers import wait_until

pytestmark = pytest.mark.slow  # a Temporal dev server, the services, a worker and a Supervisor per test

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Up:
    process: subprocess.Popen[bytes]
    state_dir: Path
    out_path: Path
    err_path: Path

    def out(self) -> str:
        return self.out_path.read_text(errors="replace")

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")


def stack_processes(state_dir: Path, but: int) -> dict[int, str]:
    """Every process of this stack, found by its state dir in its command line or environment:
    the dev server, the services, the workers and their lifeline watchers."""
    found = {}
    marker = str(state_dir.resolve()).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == but:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and (marker in cmdline or marker in environ):
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def worker_pid(up: Up) -> int | None:
    for pid, cmdline in stack_processes(up.state_dir, but=up.process.pid).items():
        if "-m sas.worker" in cmdline and "sas.runtime.lifeline" not in cmdline:
            return pid
    return None


def spawn_up(tmp_path: Path, *args: str) -> Up:
    state_dir = tmp_path / "sas"
    out_path, err_path = tmp_path / "up.out", tmp_path / "up.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")} | {"COLUMNS": "300"}
    ports = ["--temporal-port", str(free_port()), "--ui-port", str(free_port()), "--services-port", str(free_port())]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "sas.cli.main", "up", "--state-dir", str(state_dir), *ports, *args],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=err,
        )
    return Up(process, state_dir, out_path, err_path)


@asynccontextmanager
async def sas_up(tmp_path: Path, *args: str) -> AsyncIterator[Up]:
    """``sas up``, its stack started once this yields; SIGKILLed with its stack if a test left it up."""
    up = spawn_up(tmp_path, *args)
    try:
        await wait_until(lambda: _said(up, "Ctrl-C stops everything"), timeout=120, what="sas up to say it is up")
        assert up.process.poll() is None, up.err()
        yield up
    finally:
        if up.process.poll() is None:
            up.process.kill()
            up.process.wait(30)
        for pid in stack_processes(up.state_dir, but=up.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


async def _said(up: Up, text: str) -> bool:
    return up.process.poll() is not None or text in up.out() + up.err()


async def _exited(up: Up) -> int:
    return await asyncio.to_thread(up.process.wait, 60)


async def _worker(up: Up) -> int | None:
    return worker_pid(up)


async def test_a_killed_worker_is_started_again_with_one_line(tmp_path: Path) -> None:
    async with sas_up(tmp_path) as up:
        first = await wait_until(lambda: _worker(up), timeout=30, what="the worker's process")
        assert first is not None
        os.kill(first, signal.SIGKILL)
        await wait_until(lambda: _said(up, "sas: worker-1"), timeout=60, what="sas up to restart the worker")
        second = await wait_until(lambda: _worker(up), lambda pid: pid not in (None, first), timeout=30)
        assert up.process.poll() is None, up.err()
        up.process.send_signal(signal.SIGTERM)
        code = await _exited(up)
    lines = [line for line in up.out().splitlines() if line.startswith("sas: worker-1")]
    assert lines == [
        f"sas: worker-1 (pid {first}) exited with signal 9 (SIGKILL); started again after 1s as pid {second}"
        f" (its log: {up.state_dir / 'logs' / 'worker-1.log'})"
    ]
    assert code == 0, up.err()


async def test_a_worker_that_keeps_dying_stops_the_stack_with_one_line(tmp_path: Path) -> None:
    async with sas_up(tmp_path, "--max-restarts", "2") as up:
        killed: list[int] = []
        while up.process.poll() is None and len(killed) < 10:
            pid = await wait_until(
                lambda: _worker(up),
                lambda pid: up.process.poll() is not None or pid not in (None, *killed),
                timeout=60,
                what="the worker's next process",
            )
            if pid is None or up.process.poll() is not None:
                break
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        code = await _exited(up)
        left = stack_processes(up.state_dir, but=up.process.pid)
    assert code == 1
    assert len(killed) == 3  # two restarts, and the third exit in a row stops it
    assert up.err().strip().splitlines()[0] == (
        "sas: worker-1 keeps crashing: 3 exits in a row, each within 60s of its start (last: signal 9 (SIGKILL));"
        f" its log: {up.state_dir / 'logs' / 'worker-1.log'}; stopping the stack"
    )
    assert left == {}


async def test_sigterm_stops_the_whole_stack_before_sas_up_exits(tmp_path: Path) -> None:
    async with sas_up(tmp_path) as up:

        async def running_now() -> dict[int, str]:
            return stack_processes(up.state_dir, but=up.process.pid)

        # On a loaded machine a process may be between a start and its restart when sas up says
        # it is up: the signal goes once the whole stack runs, so there is something to stop.
        running = await wait_until(
            running_now,
            lambda found: (
                any("temporal" in c for c in found.values()) and any("sas.supervisor" in c for c in found.values())
            ),
            timeout=120,
            what="the dev server and the Supervisor running",
        )
        up.process.send_signal(signal.SIGTERM)
        code = await _exited(up)
        # At once, with no grace: what a lifeline would stop later has outlived sas up.
        left = stack_processes(up.state_dir, but=up.process.pid)
    assert any("temporal" in c for c in running.values()) and any("sas.supervisor" in c for c in running.values())
    assert left == {}
    assert code == 0, up.err()
    assert "stopping" in up.out()
