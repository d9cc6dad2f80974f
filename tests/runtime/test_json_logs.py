"""The processes log JSON lines with UTC ISO-8601 times, read here from a real worker's stderr.

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

from tests.helpers import fresh_id, wait_until

ROOT = Path(__file__).resolve().parents[2]


def json_lines(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.startswith("{")]


def start_worker(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "worker"], cwd=log_path.parent, env=env, stdout=log, stderr=subprocess.STDOUT
        )


async def test_a_worker_logs_json_lines_stamped_in_utc(temporal_address: str, tmp_path: Path) -> None:
    queue = fresh_id("json-logs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    env |= {
        "TZ": "Asia/Kathmandu",  # UTC+05:45
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": queue,
        "SAS_DATABASE__URL": f"sqlite+aiosqlite:///{tmp_path / 'state.db'}",
        "SAS_LOG_LEVEL": "INFO",
    }
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
    stamped = datetime.fromisoformat(polling["ts"])
    assert polling["ts"].endswith("+00:00") and stamped.utcoffset() == timedelta(0), polling["ts"]
    # Stamped now, in UTC: a local time labelled UTC would be 5h45m off.
    assert abs(datetime.now(UTC) - stamped) < timedelta(minutes=5), polling["ts"]
    assert list(polling)[:4] == ["ts", "level", "logger", "msg"]


async def _read(path: Path) -> list[dict[str, Any]]:
    return json_lines(path)
