"""Child processes that never outlive their parent: each runs in a session (and process group) of
its own, behind a lifeline (``sas.runtime.lifeline``) that stops it when the parent dies, and is
stopped with its whole group on the way out. The one place sas starts a long-lived child."""

from __future__ import annotations

import inspect
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    # What it was started with, so that it can be started again (sas.runtime.restarts).
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] | None = None

    @property
    def pid(self) -> int:
        """The program's own pid (the lifeline execs into it)."""
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM to the child's group, then SIGKILL to the program if it has not exited within
        ``timeout``, and to whatever is left of its group once it has."""
        if self.alive():
            self.send(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
            # What is left of its group (its lifeline watcher, a grandchild that ignored SIGTERM)
            # goes now, not a moment after us: nothing of the stack outlives the one who stops it.
            self.send(signal.SIGKILL)
        self._cut_lifeline()

    def kill(self) -> None:
        """SIGKILL to the child's group: the program and anything it started."""
        self.send(signal.SIGKILL)
        self.process.wait()
        self._cut_lifeline()

    def send(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group."""
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def _cut_lifeline(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()


# Children create their files for their user only: the Temporal file, the state store, the
# ledger and the logs hold customer data (card numbers too, when payload encryption is off).
CHILD_UMASK = 0o077


def private_dir(path: Path, narrow: bool = False) -> Path:
    """``path`` as a directory only its owner can enter (0700) when made here; an existing one is
    narrowed to 0700 too with ``narrow`` (a stack's own state dir), else left as it is."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if narrow:
        path.chmod(0o700)
    return path


def spawn(name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> Child:
    """Start ``argv`` as a child that dies with us, its output appended to ``log_path`` (0600);
    what the child creates is its user's alone (``CHILD_UMASK``)."""
    private_dir(log_path.parent)
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "sas.runtime.lifeline", "--", *argv],
            # The lifeline: we never write to it; the kernel closes it when we exit, however we exit.
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            umask=CHILD_UMASK,
        )
    return Child(name, process, log_path, list(argv), env)


@dataclass
class ProcessGroup:
    """The processes of one ``sas up`` / ``sas demo`` / bench run; stopped in reverse start order."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        child = spawn(name, argv, self.log_dir / f"{name}.log", env)
        self.children.append(child)
        return child

    def python(self, name: str, args: list[str], env: dict[str, str] | None = None) -> Child:
        return self.spawn(name, [sys.executable, *args], env)

    def respawn(self, child: Child) -> Child:
        """Start an exited ``child`` again, same program, settings and log, in its place in the stop order."""
        child.stop()  # it has exited: this only lets go of its lifeline
        again = spawn(child.name, child.argv, child.log_path, child.env)
        self.children[self.children.index(child)] = again
        return again

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


async def wait_for_async(
    check: Callable[[], bool | Awaitable[bool]], child: Child, timeout: float, what: str, interval: float = 0.1
) -> None:
    """``wait_for`` for callers on an event loop; ``check`` may be a coroutine function."""
    import asyncio

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if not child.alive():
            raise RuntimeError(f"{child.name} exited while starting ({what}); its log:\n{child.log_tail()}")
        await asyncio.sleep(interval)
    raise RuntimeError(f"{child.name} not ready after {timeout:.0f}s ({what}); its log:\n{child.log_tail()}")


def port_in_use(host: str, port: int) -> bool:
    """Whether something listens on ``host:port`` (binding fails), asked without connecting to it."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False
