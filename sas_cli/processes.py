"""Child processes that never outlive ``sas``: each dies with its parent (Linux
PR_SET_PDEATHSIG) and is stopped, with its whole process group, on the way out."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the explicit stop() below still applies


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if not self.alive():
            return
        self._signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self._signal(signal.SIGKILL)
        self.process.wait()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class ProcessGroup:
    """The processes of one ``sas up`` / ``sas demo``; stopped in reverse start order."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        child = Child(name, process, log_path)
        self.children.append(child)
        return child

    def python(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Child:
        return self.spawn(name, [sys.executable, *args], env)

    def stop_all(self) -> None:
        for child in reversed(self.children):
            child.stop()

    def dead(self) -> list[Child]:
        return [c for c in self.children if not c.alive()]


def wait_for(check: Callable[[], bool], child: Child, timeout: float, what: str) -> None:
    """Wait until ``check()`` holds; fail with the child's log if it dies or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if not child.alive():
            raise RuntimeError(f"{child.name} exited while starting ({what}); its log:\n{child.log_tail()}")
        time.sleep(0.2)
    raise RuntimeError(f"{child.name} not ready after {timeout:.0f}s ({what}); its log:\n{child.log_tail()}")


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
