"""bench/supervisor_load.py still runs, shrunk to a few orders (the figures are in
docs/benchmarks.md; none is asserted here)."""

from __future__ import annotations

import pytest

from tests.scale.test_bench_scripts import run_bench

pytestmark = pytest.mark.slow


def test_supervisor_load_runs_with_a_poisoned_task() -> None:
    """With one task's undeliverable decision in the outbox the probes are still decided (a
    Supervisor the poison stopped would decide none, and the run would time out)."""
    summary = run_bench(
        "supervisor_load.py",
        "--tasks", "8", "--probes", "2", "--probe-every-s", "1", "--cooldown-s", "5", "--backends", "sqlite",
        "--poison",
        timeout=300,
    )  # fmt: skip
    assert float(summary["sqlite_c16_max_intervals"]) >= 0 and float(summary["sqlite_c16_decisions_per_s"]) >= 0


def test_supervisor_load_runs_with_open_orders() -> None:
    """With healthy orders held open at ship beside the failing ones the probes are still decided,
    and the open ones are still open at the end (the bench stops if under 90% are)."""
    summary = run_bench(
        "supervisor_load.py",
        "--tasks", "4", "--open", "4", "--probes", "2", "--probe-every-s", "1", "--cooldown-s", "5",
        "--backends", "sqlite",
        timeout=300,
    )  # fmt: skip
    assert float(summary["sqlite_c16_max_intervals"]) >= 0 and int(summary["sqlite_c16_open_at_end"]) >= 4


def test_supervisor_load_runs_with_seeded_open_tasks() -> None:
    """Seeded open tasks are read by the Supervisor's scans and left alone: the bench stops if one
    was changed or decided on (a seeded row due, or one the orphan check calls gone, would be).
    Every run reports the Supervisor's peak memory and its scans' times."""
    summary = run_bench(
        "supervisor_load.py",
        "--tasks", "4", "--seeded-open", "300", "--probes", "2", "--probe-every-s", "1", "--cooldown-s", "5",
        "--backends", "sqlite",
        timeout=300,
    )  # fmt: skip
    assert float(summary["sqlite_c16_peak_rss_mb"]) > 0
    assert float(summary["sqlite_c16_scan_ms_max"]) >= float(summary["sqlite_c16_scan_ms_median"]) > 0
