"""The processes log JSON lines with UTC ISO-8601 times, read here from a real worker's stderr:
sas's own lines, and the lines of ``workflow.logger`` and ``activity.logger`` with Temporal's
context (which workflow, run and activity) as fields of their own.

The worker runs in a time zone far from UTC, so a local time written as if it were UTC, or a
time with no zone, would show."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDReusePolicy

from sas.task_models import TaskResult, TaskState
from sas_demo_services.launcher import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.stack import ADMIN_HEADERS, order

ROOT = Path(__file__).resolve().parents[2]


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.startswith("{")]


def start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "sas.worker"], cwd=log_path.parent, env=env, stdout=log, stderr=subprocess.STDOUT
        )


def worker_env(temporal_address: str, queue: str, tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    return env | {
        "TZ": "Asia/Kathmandu",  # UTC+05:45
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": queue,
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
        "SAS_LOG_LEVEL": "INFO",
        **more,
    }


def assert_stamped_now_in_utc(entry: dict[str, Any]) -> None:
    stamped = datetime.fromisoformat(entry["ts"])
    assert entry["ts"].endswith("+00:00") and stamped.utcoffset() == timedelta(0), entry["ts"]
    # Stamped now, in UTC: a local time labelled UTC would be 5h45m off.
    assert abs(datetime.now(UTC) - stamped) < timedelta(minutes=5), entry["ts"]
    assert list(entry)[:4] == ["ts", "level", "logger", "msg"], entry


async def test_a_worker_logs_json_lines_stamped_in_utc(temporal_address: str, tmp_path: Path) -> None:
    queue = fresh_id("json-logs")
    env = worker_env(temporal_address, queue, tmp_path)
    log_path = tmp_path / "worker.log"
    worker = start_worker(env, log_path)
    try:
        entries = await wait_until(
            lambda: _read(log_path),
            lambda found: any("polling" in e.get("msg", "") for e in found) or worker.poll() is not None,
            timeout=60,
            what="the worker's 'polling' log line",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)
    polling = next((e for e in entries if "polling" in e.get("msg", "")), None)
    assert polling is not None, log_path.read_text()
    assert polling["level"] == "info" and polling["logger"] == "sas.worker"
    assert queue in polling["msg"]
    assert_stamped_now_in_utc(polling)


def one_line(entries: list[dict[str, Any]], text: str) -> dict[str, Any]:
    found = [e for e in entries if text in e.get("msg", "")]
    assert len(found) == 1, (text, [e.get("msg") for e in entries])
    return found[0]


async def test_workflow_and_activity_log_lines_carry_their_temporal_context(
    client: Client, temporal_address: str, services: ServiceProcess, tmp_path: Path
) -> None:
    """A signal the Scheduler rejects (``workflow.logger``) and a run under a task id already taken,
    which the mirror refuses (``activity.logger``): each line says which workflow, run and activity."""
    queue = fresh_id("json-context")
    task_id = fresh_id("logged")
    env = worker_env(temporal_address, queue, tmp_path, SAS_SERVICES__URL=services.url)
    # The charge waits a little, so the order is surely running when the bad signal comes.
    async with httpx.AsyncClient() as http:
        fault = {"endpoint": "payment.charge", "kind": "latency", "latency_ms": 1500, "match_order_id": task_id}
        (await http.post(f"{services.url}/admin/faults", json=fault, headers=ADMIN_HEADERS)).raise_for_status()
    log_path = tmp_path / "worker.log"
    worker = start_worker(env, log_path)
    try:
        first = await client.start_workflow(
            "OrderWorkflow", order(), id=task_id, task_queue=queue, result_type=TaskResult
        )
        await first.signal("retry", {"bogus": True})  # not an OperatorRequest: rejected and logged
        assert (await first.result()).state == TaskState.PROCESSED
        # Temporal's default reuse policy lets a second run start once the first has closed.
        second = await client.start_workflow(
            "OrderWorkflow",
            order(),
            id=task_id,
            task_queue=queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            result_type=TaskResult,
        )
        with pytest.raises(WorkflowFailureError):
            await second.result()
        entries = await wait_until(
            lambda: _read(log_path),
            lambda found: any("task id reused" in e.get("msg", "") for e in found),
            timeout=30,
            what="the mirror's 'task id reused' log line",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(30)

    rejected = one_line(entries, "retry signal rejected")
    assert rejected["level"] == "warning" and rejected["logger"] == "temporalio.workflow", rejected
    assert_stamped_now_in_utc(rejected)
    context = rejected["temporal_workflow"]
    assert context["workflow_id"] == task_id and context["run_id"] == first.result_run_id, rejected
    assert context["workflow_type"] == "OrderWorkflow" and context["task_queue"] == queue, rejected

    reused = one_line(entries, "task id reused")
    assert reused["level"] == "warning" and reused["logger"] == "temporalio.activity", reused
    assert_stamped_now_in_utc(reused)
    context = reused["temporal_activity"]
    assert context["activity_type"] == "mirror.accept", reused
    assert context["workflow_id"] == task_id and context["workflow_run_id"] == second.result_run_id, reused
    assert context["workflow_type"] == "OrderWorkflow", reused


async def _read(path: Path) -> list[dict[str, Any]]:
    return json_lines(path)
