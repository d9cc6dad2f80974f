"""Shared plumbing of the benchmarks: a throw-away stack of real processes (Temporal dev
server, remote services, workers) on free ports in a temporary directory, stopped on
the way out whatever happens (children also die with us: sas.runtime.lifeline)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sas.runtime.local_stack import LoopbackStack, temporal_binary  # noqa: E402
from sas.runtime.processes import Child, ProcessGroup, wait_for  # noqa: E402
from sas.runtime.readiness import http_ready, temporal_ready  # noqa: E402
from sas.task_models.search_attributes import dev_server_flags  # noqa: E402
from sas_demo_services.launcher import free_port  # noqa: E402

T = TypeVar("T")


def print_summary(figures: dict[str, Any], hard_exit: bool = True) -> None:
    """End a bench with its one line of ``key=value`` figures. ``hard_exit`` for scripts that
    loaded temporalio: its bridge can abort Python at interpreter exit (sdk-python #300),
    turning a good run's exit code 0 into 134."""
    print(" ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    if hard_exit:
        sys.stderr.flush()
        os._exit(0)


def install_signal_exit() -> None:
    """SIGTERM/SIGHUP end the bench through its ``finally`` blocks, so children are stopped."""

    def _exit(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)


class BenchStack(LoopbackStack):
    """Processes of one bench run; ``with BenchStack() as s:`` stops them all at the end."""

    def __init__(self, state_dir: Path | None = None, keep: bool = False) -> None:
        self._tmp = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="sas-bench-"))
        self.group = ProcessGroup(self.state_dir / "logs")
        self.keep = keep
        self.temporal_port = free_port()
        self.services_port = free_port()
        self.db_url = f"sqlite+aiosqlite:///{self.state_dir / 'state.db'}"

    # -- lifecycle
    def __enter__(self) -> BenchStack:
        install_signal_exit()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.group.stop_all()
        if self._tmp and not self.keep and exc[0] is None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        elif exc[0] is not None:
            print(f"logs kept in {self.state_dir / 'logs'}", file=sys.stderr)

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **self.stack_env(self.db_url),
            "SAS_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT),
            **extra,
        }

    # -- parts
    def start_temporal(self, search_attributes: bool = True, db_file: bool = False) -> Child:
        argv = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.temporal_port),
            "--headless",
            "--log-level",
            "error",
        ]
        if db_file:
            argv += ["--db-filename", str(self.state_dir / "temporal.db")]
        if search_attributes:
            argv += dev_server_flags()
        child = self.group.spawn("temporal", argv)
        wait_for(lambda: temporal_ready(self.temporal_address), child, 60, "Temporal's health check")
        return child

    def start_services(self, enable_faults: bool = True) -> Child:
        args = [
            "-m",
            "sas_demo_services",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.services_port),
            "--ledger",
            str(self.state_dir / "ledger.db"),
            "--log-level",
            "warning",
        ]
        if enable_faults:
            args.append("--enable-faults")
        child = self.group.python(
            "services", args, {"PYTHONPATH": str(ROOT), "SAS_SERVICES__ADMIN_TOKEN": self.admin_token}
        )
        wait_for(lambda: http_ready(self.services_url), child, 30, "services /healthz")
        return child

    def migrate(self) -> None:
        child = self.group.python("migrate", ["-m", "sas.cli.main", "migrate"], self.env())
        child.process.wait(120)
        if child.process.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{child.log_tail()}")

    def python(self, name: str, args: list[str], **env: str) -> Child:
        return self.group.python(name, args, self.env(**env))

    def sas_worker(self, name: str = "worker", **env: str) -> Child:
        return self.python(name, [str(ROOT / "worker.py")], SAS_LOG_LEVEL="INFO", **env)

    def supervisor(self, name: str = "supervisor", **env: str) -> Child:
        return self.python(name, ["-m", "sas.supervisor"], **env)


def wait_log(child: Child, pattern: str, timeout: float = 60.0) -> float:
    """Wait until the child's log matches ``pattern``; returns the seconds it took."""
    started = time.monotonic()
    rx = re.compile(pattern)
    wait_for(lambda: bool(rx.search(child.log_path.read_text(errors="replace"))), child, timeout, f"log /{pattern}/")
    return time.monotonic() - started


async def poll(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout: float, interval: float = 0.1, what: str = ""
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last value {value!r}")
        await asyncio.sleep(interval)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def order_payload(i: int = 0) -> dict[str, Any]:
    return {"customer_id": f"c-{i}", "sku": "BOOK-1", "quantity": 1, "amount_cents": 1299, "address": "1 Main St"}


async def sas_client(address: str) -> Any:
    from sas.runtime.connect import connect
    from sas.settings import TemporalSettings

    return await connect(TemporalSettings(address=address), "bench")


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A /proc/<pid>/status memory field in kB (VmRSS now, VmHWM peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def children_pids(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


__all__ = ["BenchStack", "Child", "median", "order_payload", "os", "poll", "rss_kb", "sas_client", "wait_log"]
