"""``python worker.py`` as a deployment runs it, a real process: SIGTERM while the Agents' calls are in
flight, a Temporal that cannot be reached, tracing asked for without the ``otel`` extra."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from sas import state_store
from sas.settings import Settings
from sas.task_models import TaskResult, TaskState
from sas_demo_services.launcher import ServiceProcess, free_port
from tests import stack as stacks
from tests.helpers import fresh_id, wait_until
from tests.runtime.test_json_logs import json_lines
from tests.stack import Stack, order

ROOT = Path(__file__).resolve().parents[2]
# Each charge stalls this long in the payment service: still in flight when the worker is told to stop,
# and well inside the complete-by the worker waits for (SAS_DEFAULT_STEP__COMPLETE_BY_S below).
CHARGE_LATENCY_MS = 8000
COMPLETE_BY_S = 20


def worker_env(settings: Settings, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    return env | {
        "SAS_TEMPORAL__ADDRESS": settings.temporal.address,
        "SAS_TEMPORAL__TASK_QUEUE": settings.temporal.task_queue,
        "SAS_DATABASE__URL": settings.database.url,
        "SAS_SERVICES__URL": settings.services.url,
        "SAS_DEFAULT_STEP__COMPLETE_BY_S": str(COMPLETE_BY_S),
        "SAS_LOG_LEVEL": "INFO",
        **more,
    }


def spawn_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "worker.py")], cwd=log_path.parent, env=env, stdout=log, stderr=log
        )


@asynccontextmanager
async def worker_process(env: dict[str, str], log_path: Path) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``python worker.py``, polling once this yields; killed at the end if a test left it running."""
    process = spawn_worker(env, log_path)
    try:
        await wait_until(
            lambda: _polling(log_path, process),
            timeout=60,
            what=f"the worker's 'polling' line in {log_path}",
        )
        assert process.poll() is None, log_path.read_text()
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


async def _polling(log_path: Path, process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is not None or any("polling" in e.get("msg", "") for e in json_lines(log_path))


async def charge_completions(handle: WorkflowHandle[Any, Any]) -> tuple[int, int]:
    """(attempts started, attempts completed) of the charge activity, from Temporal's history."""
    charges: set[int] = set()
    started = completed = 0
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            if event.activity_task_scheduled_event_attributes.activity_type.name == "payment.charge":
                charges.add(event.event_id)
        elif event.HasField("activity_task_started_event_attributes"):
            started += event.activity_task_started_event_attributes.scheduled_event_id in charges
        elif event.HasField("activity_task_completed_event_attributes"):
            completed += event.activity_task_completed_event_attributes.scheduled_event_id in charges
    return started, completed


@pytest.fixture
def settings(temporal_address: str, services: ServiceProcess, tmp_path: Path) -> Settings:
    return stacks.test_settings(temporal_address, services.url, f"sqlite+aiosqlite:///{tmp_path / 'state.db'}")


@pytest_asyncio.fixture
async def stack(client: Client, settings: Settings, services: ServiceProcess) -> AsyncIterator[Stack]:
    """The test's view of the store and the services; the worker is the process under test."""
    engine = state_store.create_engine(settings.database)
    try:
        yield Stack(client, settings, state_store.session_factory(engine), services.url)
    finally:
        await engine.dispose()


async def test_sigterm_lets_the_calls_in_flight_finish_and_a_new_worker_completes_every_order(
    client: Client, settings: Settings, stack: Stack, tmp_path: Path
) -> None:
    task_ids = [fresh_id("sigterm") for _ in range(3)]
    for task_id in task_ids:
        await stack.add_fault(
            endpoint="payment.charge", kind="latency", latency_ms=CHARGE_LATENCY_MS, match_order_id=task_id
        )
    env = worker_env(settings)
    async with worker_process(env, tmp_path / "worker-1.log") as first:
        handles = [
            await client.start_workflow(
                "OrderWorkflow",
                order(),
                id=task_id,
                task_queue=settings.temporal.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                result_type=TaskResult,
            )
            for task_id in task_ids
        ]

        async def charging() -> dict[str, dict[str, str]]:
            return {task_id: await stack.step_states(task_id) for task_id in task_ids}

        await wait_until(
            charging,
            lambda states: all(s.get("charge") == "Processing" for s in states.values()),
            timeout=60,
            what="every order's charge in flight",
        )
        first.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(first.wait, 60)  # raises TimeoutExpired past the deadline
    log = (tmp_path / "worker-1.log").read_text(errors="replace")
    assert code == 0, log
    assert "Traceback" not in log, log
    # Graceful: each charge in flight ran to its end on the stopping worker, once, and Temporal has it.
    for handle in handles:
        assert await charge_completions(handle) == (1, 1), handle.id
        assert (await stack.step_states(handle.id))["charge"] == "Processed", handle.id

    async with worker_process(env, tmp_path / "worker-2.log"):
        results = [await asyncio.wait_for(handle.result(), 120) for handle in handles]
    assert [r.state for r in results] == [TaskState.PROCESSED] * 3
    for task_id in task_ids:
        record = await stack.record(task_id)
        assert record is not None and record.task.state == "Processed"
        assert [(s.name, s.state, s.attempt) for s in record.steps] == [
            ("reserve", "Processed", 1),
            ("charge", "Processed", 1),
            ("ship", "Processed", 1),
        ], task_id
        # One effect per step, nothing undone.
        ledger = await stack.ledger(task_id)
        assert [(e["action"], e["idempotency_key"]) for e in ledger] == [
            ("reserve", f"{task_id}:reserve"),
            ("charge", f"{task_id}:charge"),
            ("ship", f"{task_id}:ship"),
        ], ledger


def run_python(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def said(stderr: str) -> list[str]:
    """What the process said to the person: stderr less its JSON log lines."""
    return [line for line in stderr.strip().splitlines() if not line.startswith("{")]


async def test_worker_and_supervisor_processes_that_cannot_reach_temporal_say_so_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = worker_env(settings, SAS_TEMPORAL__ADDRESS=address)
    for args in ([str(ROOT / "worker.py")], ["-m", "sas.supervisor"]):
        done = await asyncio.to_thread(run_python, env, tmp_path, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        lines = said(done.stderr)
        assert lines[0] == f"sas: cannot reach Temporal at {address}", (args, done.stderr)
        assert len(lines) == 2 and "SAS_TEMPORAL__ADDRESS" in lines[1], (args, done.stderr)


# Runs the worker as `python worker.py` does, in an interpreter where the httpx instrumentation
# cannot be imported: what a worker installed without the otel extra meets.
WITHOUT_OTEL = f"""
import runpy, sys
sys.modules["opentelemetry.instrumentation.httpx"] = None
runpy.run_path({str(ROOT / "worker.py")!r}, run_name="__main__")
"""


async def test_tracing_without_the_otel_extra_is_one_line_naming_the_extra(settings: Settings, tmp_path: Path) -> None:
    env = worker_env(settings, SAS_OTEL__ENABLED="true")
    done = await asyncio.to_thread(run_python, env, tmp_path, "-c", WITHOUT_OTEL)
    assert done.returncode == 2, done.stderr
    assert said(done.stderr) == [
        "sas: SAS_OTEL__ENABLED is set, but the otel extra is not installed "
        "(no module opentelemetry.instrumentation.httpx): pip install 'sas[otel]'"
    ], done.stderr
    assert not (tmp_path / "state.db").exists()  # it stopped before touching anything
