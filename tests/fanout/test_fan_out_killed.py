"""A worker process killed (SIGKILL, no goodbye) mid-fan-out: another worker takes the task where
its history stands and every recipient is paid exactly once (the service's ledger), the items in
flight at the kill retried under their own keys."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.client import Client

from bench._payroll_service import Ledger, payroll_service
from sas.task_models import TaskResult, TaskState
from tests.helpers import fresh_id, serving, wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def worker_env(temporal_address: str, payroll_url: str, folder: Path) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return {k: v for k, v in os.environ.items() if not k.startswith("SAS_")} | {
        "PYTHONPATH": str(ROOT),
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": f"fan-out-{suffix}",
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": f"fan-out-sup-{suffix}",
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{folder / 'state.db'}",
        "SAS_TASK_TYPES__MODULES": "bench._payroll",
        "SAS_TASK_TYPES__RUN": "payroll_run",
        "SAS_SERVICES__PAYROLL__URL": payroll_url,
        "SAS_LOG_LEVEL": "INFO",
    }


def spawn_worker(env: dict[str, str], folder: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sas.cli.main", "worker"], cwd=folder, env=env, stdout=out, stderr=out
        )


async def start_worker(env: dict[str, str], folder: Path) -> subprocess.Popen[bytes]:
    log = folder / f"worker-{uuid.uuid4().hex[:6]}.log"
    process = spawn_worker(env, folder, log)

    async def polling() -> bool:
        return process.poll() is not None or "polling" in log.read_text(errors="replace")

    await wait_until(polling, timeout=90, what=f"the worker's 'polling' line in {log}")
    assert process.poll() is None, log.read_text()
    return process


async def test_a_worker_killed_mid_fan_out_leaves_one_payment_per_recipient(
    client: Client, temporal_address: str, tmp_path: Path
) -> None:
    ledger = Ledger(slow_s=1.0)
    payload = {"recipients": [{"id": f"slow{n}" if n % 3 == 0 else f"r{n}", "cents": 100 + n} for n in range(30)]}
    async with serving(payroll_service(ledger), "the payroll service") as url:
        env = worker_env(temporal_address, url, tmp_path)
        migrated = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "sas.cli.main", "migrate"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
        )
        assert migrated.returncode == 0, migrated.stderr
        worker = await start_worker(env, tmp_path)
        try:
            task_id = fresh_id("payroll-killed")
            handle = await client.start_workflow(
                "PayrollRunWorkflow",
                payload,
                id=task_id,
                task_queue=env["SAS_TEMPORAL__TASK_QUEUE"],
                result_type=TaskResult,
            )

            async def paid() -> int:
                return len(ledger.entries)

            await wait_until(paid, lambda n: n >= 3, what="the first payments made")
            assert len(ledger.entries) < len(payload["recipients"])  # mid-fan-out
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
            worker = await start_worker(env, tmp_path)
            result = await asyncio.wait_for(handle.result(), timeout=180)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
    assert result.state == TaskState.PROCESSED
    assert Counter(who for _, who in ledger.entries) == Counter(r["id"] for r in payload["recipients"])
