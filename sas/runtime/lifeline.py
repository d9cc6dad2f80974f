"""Children that die with their parent, with no code run in a forked child.

``processes.ProcessGroup`` starts every child as ``python -m sas.runtime.lifeline PROGRAM ARGS...``
with a pipe on its stdin whose other end only the parent holds. This launcher starts a watcher
(``--watch PID``) that inherits the pipe, then replaces itself with the program (``exec``), so
the program keeps the pid the parent knows. The kernel closes the parent's end when the parent
exits for any reason, SIGKILL included; the watcher then reads end-of-file and stops the
program's process group (SIGTERM, then SIGKILL). When the program exits first, so does the watcher.

This replaces ``prctl(PR_SET_PDEATHSIG)`` in a ``preexec_fn``: code between fork and exec in a
threaded parent can deadlock, and that signal follows the thread that forked, not the process.
Standard library only: it runs before the program, for every child.

The watcher learns that the program exited from a pidfd (Linux 5.3+). Where there is none
(macOS, older kernels; ``SAS_LIFELINE_POLL=1`` forces it, for the tests) it asks twice a second
whether its parent - the program, which the watcher is a child of - is still its parent:
when the program exits, the watcher is adopted by another process.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable

# How long the program gets to stop on SIGTERM when its parent is gone, before SIGKILL.
GRACE_S = 10.0
# Without a pidfd: how often the watcher checks that the program is still its parent.
POLL_S = 0.5
POLL_ENV = "SAS_LIFELINE_POLL"


def _use_pidfd() -> bool:
    return hasattr(os, "pidfd_open") and os.environ.get(POLL_ENV) != "1"


def launch(argv: list[str]) -> None:
    """Start the watcher on our stdin (the lifeline), then become the program."""
    subprocess.Popen(
        [sys.executable, "-m", "sas.runtime.lifeline", "--watch", str(os.getpid())],
        stdin=sys.stdin.fileno(),
        stdout=subprocess.DEVNULL,
        stderr=sys.stderr.fileno(),
    )
    # Only the watcher keeps the lifeline: the program reads nothing from it.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    try:
        os.execvp(argv[0], argv)
    except OSError as err:
        print(f"sas.runtime.lifeline: cannot run {argv[0]}: {err.strerror}", file=sys.stderr)
        os._exit(127)


def watch(program_pid: int) -> None:
    """Wait for the lifeline to close (the parent died) or the program to exit, whichever first."""
    # Stopping the group on purpose signals us too: the program's exit is what ends us then.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    if not _use_pidfd():
        _watch_polling(program_pid)
        return
    try:
        program = os.pidfd_open(program_pid)
    except ProcessLookupError:
        return  # the program already exited
    while True:
        ready, _, _ = select.select([0, program], [], [])
        if program in ready:
            return
        if not os.read(0, 4096):  # end-of-file: the parent is gone
            _stop_group(lambda timeout: bool(select.select([program], [], [], timeout)[0]))
            return


def _watch_polling(program_pid: int) -> None:
    """``watch`` without a pidfd: the program is our parent until it exits."""

    def exited(timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while os.getppid() == program_pid:
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(0.1, timeout))
        return True

    while not exited(0):
        ready, _, _ = select.select([0], [], [], POLL_S)
        if ready and not os.read(0, 4096):  # end-of-file: the parent is gone
            _stop_group(exited)
            return


def _stop_group(exited: Callable[[float], bool]) -> None:
    """SIGTERM to the program's group, then SIGKILL unless ``exited(GRACE_S)`` says it has gone."""
    group = os.getpgrp()
    os.killpg(group, signal.SIGTERM)
    if not exited(GRACE_S):
        os.killpg(group, signal.SIGKILL)
    # Give the program's own children a moment to go with it before we leave the group.
    time.sleep(0.1)


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--watch":
        watch(int(args[1]))
    elif args:
        launch(args[1:] if args[0] == "--" else args)
    else:
        print("usage: python -m sas.runtime.lifeline [--] PROGRAM [ARGS...]", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
