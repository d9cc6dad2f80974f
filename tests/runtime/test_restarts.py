"""``sas up``'s keeper on real child processes, its clock in the test's hand: an exited process is
started again after its back-off with one line; one that keeps exiting soon after each start, or
one that is not restarted (Temporal), stops the stack with one line naming it and its log."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from sas.runtime.processes import Child, ProcessGroup
from sas.runtime.restarts import RestartPolicy, StackDown, StackKeeper
from tests.helpers import wait_until

pytestmark = pytest.mark.slow  # real processes, waited on in real time

SLEEP = ["-c", "import time; time.sleep(600)"]
CRASH = ["-c", "import sys; print('cannot start: bad settings', flush=True); sys.exit(3)"]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def exited(child: Child) -> None:
    await wait_until(lambda: _true(not child.alive()), timeout=30, what=f"{child.name} to exit")


async def _true(value: bool) -> bool:
    return value


async def test_a_killed_process_is_started_again_after_its_back_off_with_one_line(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs")
    clock = Clock()
    try:
        worker = group.python("worker-1", SLEEP)
        keeper = StackKeeper(group, restartable=lambda c: True, policy=RestartPolicy(first_delay_s=1), clock=clock)
        assert keeper.tend() == []
        worker.send(signal.SIGKILL)
        await exited(worker)
        waiting = keeper.tend()  # its back-off has not passed
        clock.now += 1
        lines = keeper.tend()
        again = group.children[0]
        assert waiting == []
        assert len(lines) == 1
        assert lines[0].startswith(
            f"worker-1 (pid {worker.pid}) exited with signal 9 (SIGKILL); started again after 1s"
        )
        assert f"as pid {again.pid}" in lines[0] and str(worker.log_path) in lines[0]
        assert again.pid != worker.pid and again.alive() and again.name == "worker-1"
        assert keeper.tend() == []
    finally:
        group.stop_all()
    assert not any(c.alive() for c in group.children)


async def test_a_process_that_keeps_crashing_stops_the_stack_naming_it_and_its_log(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs")
    clock = Clock()
    policy = RestartPolicy(first_delay_s=1, max_quick_exits=3)
    keeper = StackKeeper(group, restartable=lambda c: True, policy=policy, clock=clock)
    restarts: list[str] = []
    try:
        group.python("supervisor-1", CRASH)
        with pytest.raises(StackDown) as stopped:
            for _ in range(10):
                await exited(group.children[0])
                restarts += keeper.tend()
                clock.now += 5  # past any back-off, well inside stable_s: each exit is a quick one
    finally:
        group.stop_all()
    log = tmp_path / "logs" / "supervisor-1.log"
    assert len(restarts) == 3  # 3 quick exits restarted, the 4th stops the stack
    assert str(stopped.value) == (
        f"supervisor-1 keeps crashing: 4 exits in a row, each within 60s of its start (last: exit code 3);"
        f" its log: {log}"
    )
    assert log.read_text().count("cannot start: bad settings") == 4


async def test_temporal_exiting_stops_the_stack_with_one_line(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs")
    keeper = StackKeeper(group, restartable=lambda c: c.name != "temporal", clock=Clock())
    try:
        temporal = group.python("temporal", CRASH)
        await exited(temporal)
        with pytest.raises(StackDown) as stopped:
            keeper.tend()
    finally:
        group.stop_all()
    assert str(stopped.value) == f"temporal stopped unexpectedly (exit code 3); its log: {temporal.log_path}"
    assert len(group.children) == 1 and sys.executable in group.children[0].argv
