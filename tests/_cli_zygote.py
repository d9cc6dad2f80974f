"""The process the tests fork `sas` commands from (tests/cli_process.py says why).

It imports the libraries every command needs, then waits on its control socket. Each request
brings the command's argv, environment and folder, a reply socket and the command's stdin,
stdout and stderr. It forks; the child becomes the command (its own process, its own stdio,
the request's environment and folder, ``sas``'s own ``main()`` and exit code), and the parent
answers the child's pid at once and its wait status when it ends.

It stays single-threaded, so a fork never copies a lock another thread held. It exits when its
parent closes its stdin (the test process ended), leaving no server behind.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import traceback
import types

# Imported once here, never again by a command. Third-party libraries and the sas modules that
# keep nothing from the environment at import (their settings are read when a command runs);
# the CLI's own modules are not among them (sas/cli/output.py sizes its consoles at import).
PRELOAD = (
    "asyncio",
    "httpx",
    "rich.console",
    "rich.table",
    "typer",
    "pydantic",
    "pydantic_settings",
    "sqlalchemy",
    "sqlalchemy.ext.asyncio",
    "sqlalchemy.orm",
    "aiosqlite",
    "asyncpg",
    "alembic.command",
    "temporalio.client",
    "temporalio.contrib.pydantic",
    "sas.settings",
    "sas.task_models",
    "sas.state_store",
    "sas.runtime.connect",
)

MAX_REQUEST = 1 << 20


def serve(control: socket.socket) -> None:
    for module in PRELOAD:
        __import__(module)
    sys.stdout.flush()
    sys.stderr.flush()
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "request")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "lifeline")
    while True:
        for key, _ in selector.select():
            if key.data == "lifeline":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "request":
                received = _receive(control)
                if received is None:
                    return
                request, reply, stdio = received
                pid = os.fork()
                if pid == 0:
                    _become_the_command(request, stdio, control, reply)
                for fd in stdio:
                    os.close(fd)
                reply.sendall(struct.pack("!i", pid))
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, (pid, reply))
            else:
                pid, reply = key.data
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    reply.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))
                except OSError:
                    pass  # the test stopped waiting (its timeout): nothing to tell
                reply.close()


def _receive(control: socket.socket) -> tuple[dict, socket.socket, list[int]] | None:
    fds: list[int] = []
    message, ancillary, _flags, _addr = control.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(4 * struct.calcsize("i")))
    if not message:
        return None
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
    reply = socket.socket(fileno=fds[0])
    return json.loads(message), reply, fds[1:]


def _become_the_command(request: dict, stdio: list[int], control: socket.socket, reply: socket.socket) -> None:
    code = 1
    try:
        control.close()
        reply.close()
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        if request["mode"] == "-m":  # as `python -m sas.cli.main ARGS`
            sys.path[0:1] = [os.getcwd(), *extra]
            sys.argv = [request["module"], *request["args"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        else:  # as `python -c CODE ARGS`
            sys.path[0:1] = ["", *extra]
            sys.argv = ["-c", *request["args"]]
            main = types.ModuleType("__main__")  # what `-c` runs in: no spec, no package
            main.__spec__ = None
            sys.modules["__main__"] = main
            exec(compile(request["code"], "<string>", "exec"), main.__dict__)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - a traceback on stderr and exit 1, as the interpreter would
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
