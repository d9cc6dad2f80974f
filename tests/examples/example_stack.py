"""An example package on a real dev server, as its team runs it: its services where the test
started them, sas's worker and Supervisor as processes, and ``sas`` run as a command, on quick
settings (the tests wait seconds, not minutes). One stack per test module
(``tests/examples/test_trip.py``, ``tests/examples/test_payout.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from temporalio.client import Client

from tests import cli_process
from tests.helpers import wait_until

# Quick steps and a quick Supervisor: the test waits seconds, not minutes.
QUICK = {
    "SAS_DEFAULT_STEP__COMPLETE_BY_S": "4",
    "SAS_DEFAULT_STEP__MAX_ATTEMPTS": "3",
    "SAS_DEFAULT_STEP__INITIAL_INTERVAL_S": "0.2",
    "SAS_DEFAULT_STEP__MAX_INTERVAL_S": "0.5",
    "SAS_COMPENSATION__COMPLETE_BY_S": "4",
    "SAS_COMPENSATION__INITIAL_INTERVAL_S": "0.2",
    "SAS_SUPERVISOR__INTERVAL_S": "0.5",
    "SAS_SUPERVISOR__MAX_INTERVAL_S": "1",
    "SAS_SUPERVISOR__OVERDUE_GRACE_S": "1.5",
    "SAS_SUPERVISOR__COOLDOWN_TRIES": "0",
}


@dataclass
class ExampleStack:
    env: dict[str, str]
    folder: Path
    services_url: str
    client: Client
    worker: subprocess.Popen[bytes] | None = None
    supervisor: subprocess.Popen[bytes] | None = None

    async def start(self, which: str) -> subprocess.Popen[bytes]:
        log = self.folder / f"{which}-{uuid.uuid4().hex[:6]}.log"
        process = _spawn([sys.executable, "-m", "sas.cli.main", which], self.folder, self.env, log)
        await wait_until(lambda: _polling(log, process), timeout=60, what=f"the {which}'s 'polling' line in {log}")
        assert process.poll() is None, log.read_text()
        return process

    async def sas(self, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "sas.cli.main", *args]
        return await asyncio.to_thread(
            cli_process.run, argv, capture_output=True, text=True, env=self.env, cwd=self.folder, timeout=180
        )

    async def submit_as(self, task_type: str, task_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """``sas submit --type TYPE --wait``: the task's result once it ended Processed or Compensated."""
        (self.folder / f"{task_id}.json").write_text(json.dumps(payload))
        argv = ["submit", "--type", task_type, "--input", f"{task_id}.json", "--id", task_id, "--wait", "--json"]
        done = await self.sas(*argv)
        said = json.loads(done.stdout)
        # --wait says the outcome with its exit code: 0 done, 3 undone as a whole (docs/cli.md).
        assert done.returncode == {"Processed": 0, "Compensated": 3}.get(said.get("state")), done.stderr
        result: dict[str, Any] = said["result"]
        return result

    async def entries(self, **query: str) -> list[dict[str, Any]]:
        """The services' ledger: ``GET /ledger?<query>``'s entries."""
        entries: list[dict[str, Any]] = (await self.ledger_of(**query))["entries"]
        return entries

    async def ledger_of(self, **query: str) -> dict[str, Any]:
        """The services' whole answer to ``GET /ledger?<query>``."""
        async with httpx.AsyncClient() as http:
            answer = await http.get(f"{self.services_url}/ledger", params=query)
        answer.raise_for_status()
        said: dict[str, Any] = answer.json()
        return said

    async def fault(self, **rule: Any) -> None:
        async with httpx.AsyncClient() as http:
            (await http.post(f"{self.services_url}/admin/faults", json=rule)).raise_for_status()

    async def show(self, task_id: str) -> dict[str, Any]:
        """``sas show ID --json``."""
        shown = await self.sas("show", task_id, "--json")
        assert shown.returncode == 0, shown.stderr
        said: dict[str, Any] = json.loads(shown.stdout)
        return said

    async def mirror(self, task_id: str) -> dict[str, str]:
        """Each step's state as the state store has it (``sas show``)."""
        return {s["name"]: s["state"] for s in (await self.show(task_id))["steps"]}


def _spawn(argv: list[str], folder: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(argv, cwd=folder, env=env, stdout=out, stderr=out)


async def _polling(log: Path, process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is not None or "polling" in log.read_text(errors="replace")


S = TypeVar("S", bound=ExampleStack)


@asynccontextmanager
async def example_stack(
    kind: type[S],
    client: Client,
    temporal_address: str,
    services_url: str,
    folder: Path,
    *,
    services: Iterable[str],
    settings: Mapping[str, str] | None = None,
) -> AsyncIterator[S]:
    """A worker and a Supervisor of their own (queues, Supervisor id and state store), with each
    of ``services`` at ``services_url`` (``SAS_SERVICES__<NAME>__URL``), on the quick settings
    and ``settings`` over them; killed when the block ends."""
    suffix = uuid.uuid4().hex[:8]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")} | {
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": f"{folder.name}-{suffix}",
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": f"{folder.name}-sup-{suffix}",
        "SAS_SUPERVISOR__WORKFLOW_ID": f"{folder.name}-supervisor-{suffix}",
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{folder / 'state.db'}",
        # The example's services, where its team runs them: per-service settings.
        **{f"SAS_SERVICES__{name.upper()}__URL": services_url for name in services},
        **QUICK,
        "SAS_LOG_LEVEL": "INFO",
        "COLUMNS": "200",
        **(settings or {}),
    }
    stack = kind(env, folder, services_url, client)
    try:
        stack.worker = await stack.start("worker")
        stack.supervisor = await stack.start("supervisor")
        yield stack
    finally:
        for process in (stack.worker, stack.supervisor):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(30)
        try:
            await client.get_workflow_handle(env["SAS_SUPERVISOR__WORKFLOW_ID"]).terminate("test over")
        except Exception:  # noqa: BLE001 - already gone
            pass
