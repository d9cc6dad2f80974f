"""`sas` commands in their own processes, without paying for the import of every library each time.

The suite runs a few hundred `sas` commands as an operator would, each in its own process.
Importing temporalio, SQLAlchemy and pydantic took most of each one's CPU (about 0.6 s of a
0.8 s command), which made the commands about a quarter of the suite's CPU on two cores. So
each pytest process keeps one process that has imported them (tests/_cli_zygote.py), and a
command is a fork of it: still its own process, with its own environment, folder, stdin,
stdout, stderr and exit code, running ``sas``'s own ``main()``.

``run`` takes ``subprocess.run``'s arguments. Only the two ways the tests start the command
(``python -m sas.cli.main ARGS`` and ``python -c "from sas.cli.main import main; main()" ARGS``)
are forked; anything else, and any platform without ``fork``/``pidfd_open``, runs as before. The
tests of what a fresh interpreter imports or how it starts (tests/cli/test_startup_imports.py,
the long-running commands, the wheel) start a new interpreter on purpose and don't come here.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
MAIN_CODE = "from sas.cli.main import main; main()"

_lock = threading.Lock()
_zygote: tuple[subprocess.Popen[bytes], socket.socket] | None = None


def run(argv: list[str], **options: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(argv, **options)``; a `sas` command is forked from the preloaded process."""
    request = _as_request(argv)
    fresh = os.environ.get("SAS_TEST_CLI_FRESH") == "1" or not _can_fork()
    if request is None or fresh or not _MIRRORED.issuperset(options):
        return subprocess.run(argv, **options)
    return _run_forked(argv, request, **options)


# The options of subprocess.run that a forked command honours; any other runs the real thing.
_MIRRORED = frozenset({"timeout", "text", "check", "input", "env", "cwd", "capture_output", "stdout", "stderr"})


def _as_request(argv: list[str]) -> dict[str, Any] | None:
    if len(argv) < 3 or argv[0] != sys.executable:
        return None
    if argv[1] == "-m" and argv[2] == "sas.cli.main":
        return {"mode": "-m", "module": argv[2], "args": list(argv[3:])}
    if argv[1] == "-c" and argv[2] == MAIN_CODE:
        return {"mode": "-c", "code": argv[2], "args": list(argv[3:])}
    return None


def _can_fork() -> bool:
    return hasattr(os, "fork") and hasattr(os, "pidfd_open") and hasattr(socket, "SCM_RIGHTS")


def _control() -> socket.socket:
    global _zygote
    with _lock:
        if _zygote is not None and _zygote[0].poll() is None:
            return _zygote[1]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        process = subprocess.Popen(
            [sys.executable, "-m", "tests._cli_zygote", str(theirs.fileno())],
            cwd=ROOT,
            stdin=subprocess.PIPE,  # its lifeline: closed when this process ends
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        _zygote = (process, ours)
        atexit.register(_stop, process)
        return ours


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()


def _run_forked(argv: list[str], request: dict[str, Any], **options: Any) -> subprocess.CompletedProcess[Any]:
    timeout: float | None = options.get("timeout")
    text = options.get("text", False)
    data = options.get("input")
    env = options.get("env")
    cwd = options.get("cwd")
    capture = options.get("capture_output", False)
    stdout = options.get("stdout", subprocess.PIPE if capture else None)
    stderr = options.get("stderr", subprocess.PIPE if capture else None)
    request["env"] = dict(os.environ if env is None else env)
    request["cwd"] = str(cwd if cwd is not None else os.getcwd())
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as given:
        opened: list[int] = []
        if data is not None:
            given.write(data.encode() if isinstance(data, str) else data)
            given.seek(0)
            stdin_fd = given.fileno()
        else:
            stdin_fd = _devnull(os.O_RDONLY, opened)
        stdout_fd = _target(stdout, out, 1, opened)
        stderr_fd = out.fileno() if stderr == subprocess.STDOUT else _target(stderr, err, 2, opened)
        ours, theirs = socket.socketpair()
        try:
            with ours:
                _control().sendmsg(
                    [json.dumps(request).encode()],
                    [
                        (
                            socket.SOL_SOCKET,
                            socket.SCM_RIGHTS,
                            struct.pack("4i", theirs.fileno(), stdin_fd, stdout_fd, stderr_fd),
                        )
                    ],
                )
                theirs.close()
                pid = _read_int(ours, None)
                try:
                    code = _read_int(ours, timeout)
                except TimeoutError:
                    _kill(pid)
                    raise subprocess.TimeoutExpired(argv, timeout or 0) from None
        finally:
            for fd in opened:
                os.close(fd)
        captured = [_read(f, text) if want == subprocess.PIPE else None for f, want in ((out, stdout), (err, stderr))]
    done = subprocess.CompletedProcess(argv, code, captured[0], captured[1])
    if options.get("check", False):
        done.check_returncode()
    return done


def _target(wanted: Any, capture: IO[bytes], default_fd: int, opened: list[int]) -> int:
    if wanted == subprocess.PIPE:
        return capture.fileno()
    if wanted is None:
        return default_fd
    if wanted == subprocess.DEVNULL:
        return _devnull(os.O_WRONLY, opened)
    return wanted if isinstance(wanted, int) else wanted.fileno()


def _devnull(mode: int, opened: list[int]) -> int:
    fd = os.open(os.devnull, mode)
    opened.append(fd)
    return fd


def _read(f: IO[bytes], text: bool) -> str | bytes:
    f.seek(0)
    data = f.read()
    return data.decode(errors="replace") if text else data


def _read_int(sock: socket.socket, timeout: float | None) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    buffer = b""
    while len(buffer) < 4:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
        try:
            chunk = sock.recv(4 - len(buffer))
        except TimeoutError:  # an OSError too, but the caller's to handle
            raise
        except OSError as err:
            raise RuntimeError(f"the `sas` command's parent process went away: {err}") from None
        if not chunk:
            raise RuntimeError("the `sas` command's parent process went away")
        buffer += chunk
    return int(struct.unpack("!i", buffer)[0])


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
