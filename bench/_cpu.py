"""Where a bench's CPU goes: per process and per worker thread kind from ``/proc``, the
PostgreSQL backends serving the bench's database, and py-spy profiles of a worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def cpu_s(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds of a process (or one of its threads) so far."""
    try:
        stat = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone (a PostgreSQL backend whose connection closed)
        return 0.0
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks (100 Hz)


def thread_cpu_s(pid: int) -> dict[str, float]:
    """A worker's CPU by kind of thread: ``main`` (the event loop: activities, and workflow
    activations' payload visits), ``threads`` (Python threads: workflow activations, the SQLite
    writer), ``core`` (the SDK's Rust runtime: gRPC, protobuf, its state machines)."""
    out = {"main": 0.0, "threads": 0.0, "core": 0.0}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return out
    for tid in tids:
        try:
            comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
        kind = "main" if tid == pid else ("core" if comm.startswith(("tokio", "temporal")) else "threads")
        out[kind] += cpu_s(pid, tid)
    return out


async def pg_backends(sessions: Any) -> list[int]:
    """The PostgreSQL server processes serving the bench's database (when it is on this machine):
    their CPU is part of what a design costs, and is on the same cores as everything else."""
    from sqlalchemy import text

    async with sessions() as session:
        rows = await session.execute(
            text("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
        )
        return [int(pid) for (pid,) in rows]


def start_profile(folder: str | None, name: str, pid: int, gil: bool = False) -> Any:
    """py-spy (if asked for) on a worker: raw stacks into ``folder/name.txt``, only of the thread
    holding the GIL with ``gil`` (what limits a Python worker)."""
    if not folder:
        return None
    import shutil

    from sas.runtime.processes import spawn

    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    argv = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "100", "--nonblocking"]
    argv += [*(["--gil"] if gil else []), "-o", str(Path(folder) / f"{name}.txt")]
    return spawn(f"py-spy-{name}", argv, Path(folder) / f"{name}.py-spy.log")


def stop_profile(spy: Any) -> None:
    if spy is not None:
        spy.send(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy.process.wait(30)
        except subprocess.TimeoutExpired:
            spy.kill()
