"""bench/fan_out.py still runs, shrunk to a few items: one task of them against as many one-step
tasks, its histories and `sas show` (the figures of the full run are in docs/benchmarks.md; only
what holds at any size is asserted here)."""

from __future__ import annotations

import pytest

from tests.scale.test_bench_scripts import run_bench

pytestmark = pytest.mark.slow


def test_fan_out_bench_runs_shrunk() -> None:
    summary = run_bench("fan_out.py", "--items", "30", timeout=300)
    assert summary["items"] == "30" and summary["batches"] == "1"
    assert float(summary["cpu_ratio"]) > 0 and float(summary["time_ratio"]) > 0
    # The parent's history holds a few events per batch, never one per item.
    assert int(summary["task_history_events"]) < 30
