"""The remote services log JSON lines like every other sas process (``ts`` in UTC first, then
``level``, ``logger``, ``msg``): their own lines and uvicorn's, read from a real process."""

from __future__ import annotations

import json
from datetime import datetime as dt
from datetime import timedelta
from pathlib import Path

import httpx

from sas_demo_services.launcher import free_port, start_service_process


def test_the_services_log_json_lines(tmp_path: Path) -> None:
    log = tmp_path / "services.log"
    with start_service_process(
        free_port(), str(tmp_path / "ledger.db"), enable_faults=True, log_path=str(log), admin_token="t"
    ) as services:
        headers = {"Authorization": "Bearer t"}
        httpx.post(
            f"{services.url}/admin/faults", json={"endpoint": "payment.charge", "kind": "transient"}, headers=headers
        ).raise_for_status()
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert {e["logger"] for e in entries} >= {"sas_demo_services", "uvicorn.error"}
    assert any("fault added" in e["msg"] for e in entries)
    for entry in entries:
        assert list(entry)[:4] == ["ts", "level", "logger", "msg"], entry
        assert dt.fromisoformat(entry["ts"]).utcoffset() == timedelta(0) and entry["level"].islower()
        assert "\x1b" not in json.dumps(entry, ensure_ascii=False)  # no terminal colours in a log
