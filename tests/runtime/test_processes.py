"""The one child-process helper: a child never outlives its parent, even one killed with SIGKILL;
stopping a child stops its whole group; the pid the parent holds is the program's own; readiness
is asked of the server, not of its port."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

from sas.runtime.processes import ProcessGroup, free_port, port_in_use
from sas.runtime.readiness import http_ready, temporal_healthy, temporal_ready
from tests.helpers import fresh_id, wait_until

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


def start_parent(tmp_path: Path, marker: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path), marker], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )


async def test_a_child_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    marker = fresh_id("lifeline")
    parent = await asyncio.to_thread(start_parent, tmp_path, marker)
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
