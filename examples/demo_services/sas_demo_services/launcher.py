"""Start the services in a child process and stop them again.

The child runs in a session (and process group) of its own, which ``stop`` and ``kill``
signal as a whole. It never outlives its parent, so a crashed test run or demo never leaves
a server behind: its stdin is a pipe that only the parent holds open (the lifeline). The
kernel closes it when the parent exits, however it exits (SIGKILL included), and a thread in
the child that waits on it then stops the server.

No code runs in the forked child before ``exec`` (no ``preexec_fn``, no libc call): in a
threaded parent that can deadlock. sas's own processes are started the same way by
``sas/runtime/processes.py``; this package stands alone (it plays the outside services), so
it keeps this small launcher of its own.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType

from sas_demo_services.client import probe_health

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# What the child runs: ``python -m sas_demo_services`` with the lifeline watched (see run_child).
_CHILD_PROGRAM = "from sas_demo_services.launcher import run_child; run_child()"
# How long an orphaned service gets to stop on SIGTERM before it exits at once.
_ORPHAN_GRACE_S = 5.0


class ServiceStartError(RuntimeError):
    """The service process exited or never became healthy."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now and that no outgoing connection will take before it is used.

    Asking the OS for port 0 gives a port from the kernel's ephemeral range, the same range every
    outgoing connection's local port comes from: between this call and the server's bind, a busy
    machine's clients can take it ("address already in use"; seen in the test suite). So the port
    is drawn from below that range instead, at random, and checked free by binding it.

    Args:
        host: Interface to probe.

    Returns:
        The port number.
    """
    low, _high = _ephemeral_range()
    floor = 10_000  # above the well-known and most registered services' ports
    if low - floor < 1_000:  # an unusual ephemeral range: fall back to asking the OS
        return _os_chosen_port(host)
    draw = random.SystemRandom()
    for _ in range(200):
        port = draw.randrange(floor, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    return _os_chosen_port(host)


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux; IANA's elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49_152, 65_535


def _os_chosen_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _tail(path: str, lines: int = 40) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as err:
        return f"(log unreadable: {err})"
    return "\n".join(text.splitlines()[-lines:])


class ServiceProcess:
    """A running service process.

    Attributes:
        host: Interface it listens on.
        port: Its port.
        ledger_path: Its ledger file.
        log_path: Where its stdout and stderr go.
        enable_faults: Whether the admin API is on.
        admin_token: The bearer token its admin API takes (None when it is off).
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        host: str,
        port: int,
        ledger_path: str,
        log_path: str,
        enable_faults: bool,
        owns_log: bool,
        admin_token: str | None = None,
    ) -> None:
        self._process = process
        self.host = host
        self.port = port
        self.ledger_path = ledger_path
        self.log_path = log_path
        self.enable_faults = enable_faults
        self._owns_log = owns_log
        self.admin_token = admin_token

    @property
    def admin_headers(self) -> dict[str, str]:
        """The ``Authorization`` header its ``/admin`` API requires."""
        return {"Authorization": f"Bearer {self.admin_token}"} if self.admin_token else {}

    @property
    def url(self) -> str:
        """Root URL, such as ``http://127.0.0.1:8081``."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        """Process id."""
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """Exit status, or None while it runs."""
        return self._process.poll()

    @property
    def running(self) -> bool:
        """Whether the process is still alive."""
        return self._process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of its log."""
        return _tail(self.log_path, lines)

    def stop(self, timeout_s: float = 5.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``.

        Returns:
            The exit status (negative for a signal).
        """
        if self._process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return self.kill()
        return self._finish()

    def kill(self) -> int:
        """SIGKILL at once (a crash, as far as clients can tell).

        Returns:
            The exit status.
        """
        if self._process.poll() is None:
            self._signal_group(signal.SIGKILL)
        self._process.wait()
        return self._finish()

    def _signal_group(self, sig: int) -> None:
        """Send ``sig`` to the service's whole process group (its pid: it leads its session).

        Only while it has not been reaped, so the pid cannot belong to another process yet."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, sig)

    def _finish(self) -> int:
        returncode = self._process.wait()
        # Cut the lifeline (the child is gone): no pipe is left open.
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        if self._owns_log:
            with contextlib.suppress(OSError):
                os.unlink(self.log_path)
        return returncode

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        return f"ServiceProcess(url={self.url!r}, pid={self.pid}, {state})"


def run_child() -> None:
    """The child's program: ``python -m sas_demo_services`` with ``sys.argv``'s arguments, stopped
    when its lifeline (stdin) reaches end-of-file."""
    from sas_demo_services.__main__ import main

    threading.Thread(target=_stop_when_orphaned, name="lifeline", daemon=True).start()
    sys.exit(main(sys.argv[1:]))


def _stop_when_orphaned() -> None:
    # os.read, not sys.stdin: a daemon thread blocked inside a buffered reader can abort the
    # interpreter's shutdown. The parent never writes, so the only answer is end-of-file.
    while os.read(0, 4096):
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # the server's own graceful shutdown
    time.sleep(_ORPHAN_GRACE_S)
    os._exit(1)  # still here: stop at once


def start_service_process(
    port: int,
    ledger_path: str,
    enable_faults: bool = True,
    log_path: str | None = None,
    host: str = "127.0.0.1",
    *,
    startup_timeout_s: float = 20.0,
    fault_seed: int | None = None,
    admin_token: str | None = None,
) -> ServiceProcess:
    """Spawn ``python -m sas_demo_services`` and wait until it is healthy.

    Args:
        port: TCP port (see :func:`free_port`).
        ledger_path: SQLite ledger file; created if missing.
        enable_faults: Serve the fault-injection admin API.
        log_path: File for the child's output (appended); a temporary file, deleted on
            stop, if None.
        host: Interface to listen on.
        startup_timeout_s: How long to wait for ``/healthz``.
        fault_seed: Seed for fault probabilities.
        admin_token: Bearer token of the admin API; a random one if faults are on and it is None.

    Returns:
        The running process.

    Raises:
        ServiceStartError: If it exits or is not healthy in time; the message holds the
            tail of its log.
    """
    owns_log = log_path is None
    if log_path is None:
        fd, log_path = tempfile.mkstemp(prefix=f"remote-services-{port}-", suffix=".log")
        os.close(fd)
    command = [sys.executable, "-c", _CHILD_PROGRAM, "--host", host, "--port", str(port), "--ledger", ledger_path]
    if enable_faults:
        command.append("--enable-faults")
    if fault_seed is not None:
        command += ["--fault-seed", str(fault_seed)]
    env = dict(os.environ)
    # The caller decides, not an inherited environment variable.
    env["SAS_SERVICES_ENABLE_FAULTS"] = "1" if enable_faults else "0"
    env.pop("SAS_SERVICES__ADMIN_TOKEN", None)
    if enable_faults:
        admin_token = admin_token or secrets.token_urlsafe(24)
        env["SAS_SERVICES__ADMIN_TOKEN"] = admin_token
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"

    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command,
            # The lifeline: never written to; the kernel closes it when we exit, however we exit.
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    service = ServiceProcess(
        process, host, port, ledger_path, log_path, enable_faults, owns_log, admin_token if enable_faults else None
    )
    deadline = time.monotonic() + startup_timeout_s
    while True:
        if process.poll() is not None:
            tail = service.log_tail()
            service.kill()
            raise ServiceStartError(f"remote services exited with status {process.returncode} on start:\n{tail}")
        if probe_health(service.url, timeout_s=1.0):
            return service
        if time.monotonic() >= deadline:
            tail = service.log_tail()
            service.kill()
            raise ServiceStartError(
                f"remote services on {service.url} not healthy after {startup_timeout_s:.0f}s:\n{tail}"
            )
        time.sleep(0.05)
