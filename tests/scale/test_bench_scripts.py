"""The benchmark scripts still run, with their documented commands shrunk to a few seconds.

No figure is asserted (speed is measured in bench/, not here): each script must exit 0,
having checked its own outcome (every order ended, the sweep found exactly the due rows),
and end with its one line of key=value figures.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres import PG_ADMIN_URL, in_ci, postgres_available

pytestmark = pytest.mark.slow  # each script starts a whole stack in subprocesses

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, timeout: float = 240) -> dict[str, str]:
    """Run ``bench/<script>``; returns its summary line as a dict."""
    env = {**os.environ, "SAS_TEST_PG_URL": PG_ADMIN_URL}
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"bench/{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"bench/{script} printed nothing"
    pairs = [field.split("=", 1) for field in lines[-1].split()]
    assert all(len(p) == 2 and p[0] and p[1] for p in pairs), f"not a key=value summary: {lines[-1]!r}"
    return dict(pairs)


def test_sweep_runs_on_every_backend() -> None:
    # Locally without a server the sweep still runs on SQLite; in CI the PostgreSQL half must run.
    backends = "sqlite,postgres" if postgres_available() or in_ci() else "sqlite"
    summary = run_bench("sweep.py", "--sizes", "1100,2000", "--runs", "1", "--backends", backends)
    for backend in backends.split(","):
        assert float(summary[f"{backend}_growth"]) > 0


@pytest.mark.usefixtures("postgres_required")
def test_write_cost_runs_on_both_backends() -> None:
    summary = run_bench("write_cost.py", "--writes", "40")
    for key in ("sqlite_writer_cpu_ms", "sqlite_accept_cpu_ms", "postgres_writer_cpu_ms", "postgres_accept_cpu_ms"):
        assert float(summary[key]) > 0


def test_workflow_cost_runs() -> None:
    summary = run_bench("workflow_cost.py", "--runs", "3")
    for design in ("bare", "sas"):
        for runner in ("stock", "sas"):
            assert float(summary[f"{design}_{runner}_runner_ms"]) > 0
            assert float(summary[f"{design}_{runner}_runner_activation_ms"]) > 0


def test_throughput_runs_every_design() -> None:
    summary = run_bench("throughput.py", "--orders", "4", "--rounds", "1", "--warmup", "1")
    # The gate (sas against bare-queues) and the full cost (sas against bare), then every other
    # design against both baselines; CPU per order by process and by worker thread kind.
    for key in (
        "ratio",
        "bare_ratio",
        "bare_queues_ratio",
        "cpu_ratio",
        "cpu_sas_over_bare",
        "sas_total_ms",
        "bare_queues_total_ms",
    ):
        assert float(summary[key]) > 0, key
    # How long a round waited for the processes to settle, and the idle rate it waited for.
    assert float(summary["settle_s_max"]) >= 0 and float(summary["idle_cores"]) >= 0
    for design in ("sas_nosa", "la", "batch", "proj"):
        assert float(summary[f"{design}_ratio"]) > 0 and float(summary[f"{design}_bare_ratio"]) > 0, design
    for design in ("bare", "bare_queues", "sas"):
        for part in ("server", "services", "worker", "worker_main", "worker_threads", "worker_core"):
            assert float(summary[f"{design}_{part}_ms"]) >= 0, (design, part)


def test_latency_runs_every_design() -> None:
    summary = run_bench(
        "latency.py",
        "--rounds",
        "1",
        "--duration-s",
        "1",
        "--peak-orders",
        "4",
        "--warmup",
        "1",
        "--fraction",
        "0.5",
        "--breakdown",
        "1",
    )
    # Each design was offered the same steady load (half of bare's peak, measured in the run)
    # and every order it was offered completed; the percentiles and sas's multiples are printed.
    assert float(summary["rate"]) > 0 and float(summary["bare_peak_wps"]) > 0
    assert int(summary["sas_orders"]) == int(summary["bare_orders"]) == int(summary["bare_queues_orders"]) >= 1
    for design in ("bare", "bare_queues", "sas"):
        p50, p95, p99 = (float(summary[f"{design}_p{p}_ms"]) for p in (50, 95, 99))
        assert 0 < p50 <= p95 <= p99, design
    for p in (50, 95, 99):
        assert float(summary[f"p{p}_bare_ratio"]) > 0 and float(summary[f"p{p}_ratio"]) > 0
    # --breakdown read the orders' histories: every design's workflow tasks waited and ran, and
    # its activities ran (an order is three of them), none of it longer than the order took.
    for design in ("bare", "bare_queues", "sas"):
        wft_wait, wft_run, activity_run = (
            float(summary[f"{design}_{p}_ms"]) for p in ("wft_wait", "wft_run", "activity_run")
        )
        assert wft_wait > 0 and wft_run > 0 and activity_run > 0, design
        assert wft_wait + wft_run + activity_run <= float(summary[f"{design}_p99_ms"]), design


def test_recovery_runs() -> None:
    summary = run_bench("recovery.py", "--orders", "5", "--runs", "1", "--latency-ms", "1000")
    assert summary["orders"] == "5" and summary["runs"] == "1" and float(summary["recovery_s"]) > 0
    # The bound it compares with is made of the settings it ran with (no figure is asserted).
    assert float(summary["bound_s"]) > float(summary["complete_by_s"]) > 0 and summary["met"] in ("True", "False")


def test_memory_runs() -> None:
    summary = run_bench("memory.py", "--tasks", "20", "--hold-s", "15", "--settle-s", "1")
    assert summary["tasks"] == "20" and float(summary["per_task_kb"]) != 0


def test_outage_runs() -> None:
    summary = run_bench("outage.py", "--orders", "3", "--down-s", "20")
    # What docs/reliability.md claims of an outage of every worker: each order completes after
    # the restart, none is undone or parked, and the Supervisor acts on none ("wait" rows are
    # looks it put off, nothing signalled).
    assert (summary["orders"], summary["completed"], summary["compensated"], summary["parked"]) == ("3", "3", "0", "0")
    kinds = {pair.split(":")[0] for pair in summary["decision_kinds"].split(",")} - {"none"}
    assert kinds <= {"wait"}, summary
    assert (summary["down"], summary["down_s"]) == ("workers", "20") and float(summary["settle_s"]) >= 0


def test_breaker_runs_both_modes() -> None:
    summary = run_bench("breaker.py", "--outage-s", "6", "--normal-s", "3", "--rate", "2", "--open-s", "2")
    # The orders held while payment was down all ran once it recovered (none was undone), and the
    # line carries both modes' figures (no figure is asserted: docs/benchmarks.md has a real run's).
    assert summary["on_orders"] == summary["on_orders_completed"] and summary["on_orders_compensated"] == "0"
    assert int(summary["off_payment_requests"]) > 0 and float(summary["on_others_ratio"]) > 0
    assert summary["outage_s"] == "6"


def test_show_latency_runs_on_every_backend() -> None:
    backends = "sqlite,postgres" if postgres_available() or in_ci() else "sqlite"
    summary = run_bench("show_latency.py", "--items", "30", "--runs", "2", "--backends", backends)
    # Every `sas show` exited 0 with the items counted by state and none listed (the script checks
    # each run); the line carries both commands' figures and their ratio, none asserted.
    assert (summary["items"], summary["runs"]) == ("30", "2")
    for backend in backends.split(","):
        for key in ("python_median_s", "show_median_s", "show_p90_s", "ratio", "read_s"):
            assert float(summary[f"{backend}_{key}"]) > 0, (backend, key)


def test_profile_diff_reads_py_spy_raw_stacks(tmp_path: Path) -> None:
    # Two rounds' raw stacks, as py-spy writes them for bench/throughput.py --profile; "bare" must
    # not pick up "bare-queues" files.
    (tmp_path / "sas-r1-0.txt").write_text("run (worker.py:10);write (agent_writes.py:5) 30\nrun (worker.py:10) 10\n")
    (tmp_path / "sas-r1-1.txt").write_text("run (worker.py:12);write (agent_writes.py:6) 10\n")
    (tmp_path / "bare-queues-r1-0.txt").write_text("run (worker.py:10) 20\n")
    (tmp_path / "bare-r1-0.txt").write_text("run (worker.py:10) 99\n")
    summary = run_bench("profile_diff.py", str(tmp_path), "--orders", "10")
    assert summary["rounds"] == "2" and float(summary["extra_ms"]) == float(summary["sas_sampled_ms"]) - 20.0


def test_history_cost_runs_both_designs() -> None:
    summary = run_bench("history_cost.py", "--orders", "2")
    # Every design's orders ended and their histories were read; no count is asserted here.
    for design in ("bare_queues", "sas"):
        assert float(summary[f"{design}_events"]) > 0 and float(summary[f"{design}_history_bytes"]) > 0
