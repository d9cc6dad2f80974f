"""The chaos run's processes (bench/chaos.py), each restartable on its own port and files, and
the remote fault rules it posts to the demo services.

Besides Temporal, the demo services, the worker and the Supervisor, the stack runs the chaos
trip's own services (``trip_services``: bench/_chaos_trip_services.py) and those of the fan-out
and child task (``shape_services``: bench/_chaos_shape_services.py) with the same fault rates,
and gives the worker, the Supervisor and the run itself their task types (bench/_chaos_trip.py,
bench/_chaos_shapes.py) through ``SAS_TASK_TYPES__MODULES``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import _chaos_env
from bench._chaos_shape_services import SERVICES as SHAPE_SERVICES
from bench._chaos_trip_services import SERVICES as TRIP_SERVICES
from sas.cli.demo_plan import DEMO_ENV
from sas.runtime.local_stack import LoopbackStack, temporal_binary
from sas.runtime.processes import Child, ProcessGroup, wait_for_async
from sas.runtime.readiness import http_healthy, temporal_healthy
from sas.task_models.search_attributes import dev_server_flags
from sas_demo_services.launcher import free_port

ROOT = Path(__file__).resolve().parents[1]
TASK_TYPE_MODULES = "bench._chaos_trip,bench._chaos_shapes"

FORWARD = ("inventory.reserve", "payment.charge", "shipping.ship")
UNDO = ("inventory.release", "payment.refund", "shipping.cancel")
TRANSIENT, HANG, DECLINE = 0.20, 0.05, 0.03


def fault_rules(scope: str, hang_s: float) -> list[dict[str, Any]]:
    """Rules with exact per-call rates. A call takes the first rule whose dice fire, so a
    later rule's probability is conditioned on the earlier ones not firing."""
    rules: list[dict[str, Any]] = []
    for endpoint in FORWARD + (UNDO if scope == "all" else ()):
        taken = 0.0
        if endpoint == "payment.charge":
            rules.append(
                {
                    "endpoint": endpoint,
                    "kind": "permanent",
                    "probability": DECLINE,
                    "status": 402,
                    "error": "card_declined",
                    "message": "the card was declined (injected fault)",
                }
            )
            taken += DECLINE
        rules.append(
            {"endpoint": endpoint, "kind": "hang", "probability": round(HANG / (1 - taken), 6), "hang_s": hang_s}
        )
        taken += HANG
        rules.append(
            {"endpoint": endpoint, "kind": "transient", "probability": round(TRANSIENT / (1 - taken), 6), "status": 503}
        )
    return rules


class Stack(LoopbackStack):
    """The processes of one chaos run, each restartable on its own port and files."""

    def __init__(self, state_dir: Path, db_url: str, seed: int, log: Any, scope: str, hang_s: float) -> None:
        self.dir = state_dir
        self.scope, self.hang_s = scope, hang_s
        self.group = ProcessGroup(state_dir / "logs")
        self.log = log
        self.seed = seed
        self.temporal_port, self.http_port, self.services_port = free_port(), free_port(), free_port()
        self.trip_services_port, self.shape_services_port = free_port(), free_port()
        self.db_url = db_url
        self.children: dict[str, Child] = {}
        # The code under test, frozen at the start: every restarted process runs the same
        # version even if the working tree changes meanwhile (a changed workflow would
        # otherwise fail to replay the histories its predecessor wrote).
        self.src = state_dir / "src"
        shutil.copytree(
            ROOT,
            self.src,
            ignore=shutil.ignore_patterns(
                ".git", ".venv", ".sas", "__pycache__", "*.egg-info", "tests", "docs", ".pytest_cache"
            ),
            dirs_exist_ok=True,
        )
        # The snapshot and its examples, the run's site view; `python -S` (bench/_chaos_env.py).
        self.pythonpath = _chaos_env.pythonpath(self.src, Path(os.environ[_chaos_env.SITE_ENV]))
        self.restarts: Counter[str] = Counter()
        self.down: set[str] = set()  # stopped on purpose, being restarted

    @property
    def trip_services_url(self) -> str:
        return f"http://127.0.0.1:{self.trip_services_port}"

    @property
    def shape_services_url(self) -> str:
        return f"http://127.0.0.1:{self.shape_services_port}"

    def env(self) -> dict[str, str]:
        return {
            **DEMO_ENV,
            **self.stack_env(self.db_url),
            **trip_env(self.trip_services_url, self.shape_services_url),
            "SAS_LOG_LEVEL": "INFO",
            "PYTHONPATH": self.pythonpath,
            "PYTHONUNBUFFERED": "1",
        }

    # The waiting is async so orders keep flowing meanwhile.
    def spawn(self, name: str) -> tuple[Child, int]:
        log_path = self.group.log_dir / f"{name}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        if name == "temporal":
            child = self.group.spawn(
                name,
                [
                    temporal_binary(),
                    "server",
                    "start-dev",
                    "--db-filename",
                    str(self.dir / "temporal.db"),
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(self.temporal_port),
                    "--http-port",
                    str(self.http_port),
                    "--headless",
                    "--log-level",
                    "warn",
                    *dev_server_flags(),
                ],
            )
        elif name == "services":
            child = self.group.python(
                name,
                [
                    "-S",
                    "-P",
                    "-m",
                    "sas_demo_services",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.services_port),
                    "--ledger",
                    str(self.dir / "ledger.db"),
                    "--enable-faults",
                    "--fault-seed",
                    str(self.seed + self.restarts[name]),
                ],
                {"PYTHONPATH": self.pythonpath, "SAS_SERVICES__ADMIN_TOKEN": self.admin_token},
            )
        elif name in ("trip_services", "shape_services"):
            trips = name == "trip_services"
            child = self.group.python(
                name,
                [
                    "-S",
                    "-P",
                    "-m",
                    f"bench._chaos_{'trip' if trips else 'shape'}_services",
                    "--port",
                    str(self.trip_services_port if trips else self.shape_services_port),
                    "--ledger",
                    str(self.dir / ("trip-ledger.db" if trips else "shape-ledger.db")),
                    "--fault-seed",
                    str(self.seed + (7919 if trips else 104729) + self.restarts["services"]),
                    "--transient",
                    str(TRANSIENT),
                    "--hang",
                    str(HANG),
                    "--decline",
                    str(DECLINE),
                    "--hang-s",
                    str(self.hang_s),
                    "--fault-scope",
                    self.scope,
                ],
                {"PYTHONPATH": self.pythonpath},
            )
        elif name == "worker":
            child = self.group.python(name, ["-S", "-P", str(self.src / "worker.py")], self.env())
        elif name == "supervisor":
            child = self.group.python(name, ["-S", "-P", "-m", "sas.supervisor"], self.env())
        elif name == "migrate":
            child = self.group.python(name, ["-S", "-P", "-m", "sas.cli.main", "migrate"], self.env())
        else:
            raise ValueError(name)
        self.children[name] = child
        self.down.discard(name)
        return child, offset

    async def start(self, name: str, timeout: float = 90.0) -> float:
        started = time.monotonic()
        child, offset = self.spawn(name)
        if name == "temporal":
            await self._until(
                lambda: temporal_healthy(self.temporal_address), child, timeout, "Temporal's health check"
            )
        elif name == "services":
            await self._until(lambda: http_healthy(self.services_url), child, timeout, "services /healthz")
        elif name == "trip_services":
            await self._until(lambda: http_healthy(self.trip_services_url), child, timeout, "trip services /healthz")
        elif name == "shape_services":
            await self._until(lambda: http_healthy(self.shape_services_url), child, timeout, "shape services /healthz")
        elif name in ("worker", "supervisor"):
            await self._until(
                lambda: "polling" in _read_from(child.log_path, offset), child, timeout, "'polling' in its log"
            )
        return time.monotonic() - started

    async def migrate(self) -> None:
        child, _ = self.spawn("migrate")
        while child.process.poll() is None:
            await asyncio.sleep(0.2)
        if child.process.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{child.log_tail()}")

    async def _until(self, ok: Any, child: Child, timeout: float, what: str) -> None:
        await wait_for_async(ok, child, timeout, what)

    async def kill(self, name: str) -> None:
        self.down.add(name)
        self.children[name].kill()  # SIGKILL to its process group

    async def terminate(self, name: str, grace: float = 20.0) -> None:
        child = self.children[name]
        self.down.add(name)
        child.send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while child.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if child.alive():
            child.kill()

    def dead(self) -> list[str]:
        return [n for n, c in self.children.items() if n != "migrate" and n not in self.down and not c.alive()]

    def stop(self) -> None:
        self.group.stop_all()


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def trip_env(url: str, shapes_url: str) -> dict[str, str]:
    """What a process needs to run (or submit) the chaos trip, fan-out and child task: their
    modules and their services' URLs."""
    return {
        "SAS_TASK_TYPES__MODULES": TASK_TYPE_MODULES,
        **{f"SAS_SERVICES__{name.upper()}__URL": url for name in TRIP_SERVICES},
        **{f"SAS_SERVICES__{name.upper()}__URL": shapes_url for name in SHAPE_SERVICES},
    }
