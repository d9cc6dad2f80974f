"""The one child-process helper: a child never outlives its parent, even one killed with SIGKILL;
stopping a child stops its whole group; the pid the parent holds is the program's own; readiness
is asked of the server, not of its port."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sas.runtime.lifeline import POLL_ENV
from sas.runtime.local_stack import LocalStackConfig
from sas.runtime.processes import ProcessGroup, port_in_use
from sas.runtime.readiness import http_ready, temporal_healthy, temporal_ready
from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until

pytestmark = pytest.mark.slow  # process groups and watchers, waited on in real time

PARENT = """
import sys, time
from pathlib import Path
from sas.runtime.processes import ProcessGroup
group = ProcessGroup(Path(sys.argv[1]))
child = group.python("sleeper", ["-c", "import time; time.sleep(600)  # " + sys.argv[2]])
print(child.pid, flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie waiting for whoever adopted it counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def start_parent(tmp_path: Path, marker: str, poll: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, POLL_ENV: "1" if poll else "0"}
    return subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path), marker], stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=env
    )


# pidfd: Linux's way; poll: the fallback where there is no pidfd (macOS), forced here.
@pytest.mark.parametrize("poll", [False, True], ids=["pidfd", "poll"])
async def test_a_child_dies_when_its_parent_is_killed(tmp_path: Path, poll: bool) -> None:
    marker = fresh_id("lifeline")
    parent = await asyncio.to_thread(start_parent, tmp_path, marker, poll)
    assert parent.stdout is not None
    child_pid = int(await asyncio.to_thread(parent.stdout.readline))
    # The pid the parent holds becomes the program's own once the launcher has exec'd it (until
    # then, and for a moment during the exec, the same pid shows the launcher or nothing).
    await wait_until(
        lambda: _runs_the_program(child_pid, marker), timeout=30, what="the launcher to become the program"
    )
    parent.kill()  # SIGKILL: no clean-up code runs in the parent
    await asyncio.to_thread(parent.wait)
    await wait_until(lambda: _gone(child_pid), timeout=30, what="the orphaned child to be stopped")


async def _gone(pid: int) -> bool:
    return gone(pid)


def watchers_of(pid: int) -> list[int]:
    """The lifeline watchers of program ``pid`` (``python -m sas.runtime.lifeline --watch PID``)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_text().split("\0")
        except OSError:
            continue
        if "sas.runtime.lifeline" in argv and argv[-3:-1] == ["--watch", str(pid)] and not gone(int(proc.name)):
            found.append(int(proc.name))
    return found


@pytest.mark.parametrize("poll", [False, True], ids=["pidfd", "poll"])
async def test_the_watcher_ends_when_its_program_does(tmp_path: Path, poll: bool, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(POLL_ENV, "1" if poll else "0")
    group = ProcessGroup(tmp_path / "logs")
    child = group.python("short", ["-c", "import time; time.sleep(3)"])
    watchers = await wait_until(lambda: _watchers(child.pid), lambda w: len(w) == 1, what="its watcher to start")
    await asyncio.to_thread(child.process.wait, 30)
    await wait_until(lambda: _gone(watchers[0]), timeout=30, what="the watcher to end with its program")
    group.stop_all()


async def _watchers(pid: int) -> list[int]:
    return watchers_of(pid)


def test_a_childs_files_and_log_are_its_users_alone(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs")
    made = tmp_path / "made-by-the-child"
    child = group.python("writer", ["-c", f"open({str(made)!r}, 'w').write('card numbers')"])
    child.process.wait(30)
    group.stop_all()
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert stat.S_IMODE(child.log_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(child.log_path.parent.stat().st_mode) == 0o700


def test_a_stacks_state_dir_is_narrowed_to_its_owner(tmp_path: Path) -> None:
    state_dir = tmp_path / ".sas"
    state_dir.mkdir(mode=0o755)
    state_dir.chmod(0o755)  # as an older sas left it
    config = LocalStackConfig(state_dir=state_dir)
    assert config.admin_token  # made on first use, in the state dir
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(config.admin_token_file.stat().st_mode) == 0o600


async def _runs_the_program(pid: int, marker: str) -> bool:
    argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    return any(marker in arg for arg in argv) and "sas.runtime.lifeline" not in argv


async def test_stop_ends_the_child_and_everything_it_started(tmp_path: Path) -> None:
    group = ProcessGroup(tmp_path / "logs")
    script = (
        "import subprocess, sys, time\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('grandchild', grandchild.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    child = group.python("parent-of-one", ["-c", script])
    await wait_until(lambda: _log_has(child.log_path, "grandchild "), timeout=30, what="the grandchild to start")
    grandchild_pid = int(child.log_path.read_text().split("grandchild ", 1)[1].split()[0])
    assert not gone(grandchild_pid)
    group.stop_all()
    assert not child.alive() and child.process.returncode == -signal.SIGTERM
    await wait_until(lambda: _gone(grandchild_pid), timeout=30, what="the grandchild to be stopped too")


async def _log_has(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


async def test_readiness_asks_the_server_itself(temporal_address: str, services) -> None:  # type: ignore[no-untyped-def]
    assert await temporal_healthy(temporal_address)
    assert temporal_ready(temporal_address)  # from sync code too
    assert http_ready(services.url)
    closed = f"127.0.0.1:{free_port()}"
    assert not await temporal_healthy(closed)
    assert not http_ready(f"http://{closed}")
    # An HTTP server is listening on the services' port, but it is not a Temporal frontend.
    assert port_in_use("127.0.0.1", services.port)
    assert not await temporal_healthy(f"127.0.0.1:{services.port}", timeout_s=2)
