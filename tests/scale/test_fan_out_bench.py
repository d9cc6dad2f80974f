"""bench/fan_out.py still runs, shrunk to 100 items: one task of them against as many one-step
tasks, its histories, the same fan-out with refusals inside and past its tolerance, and `sas show`
(the figures of the full run are in docs/benchmarks.md; only what holds at any size is asserted
here: counts and the service's ledger, never a time)."""

from __future__ import annotations

import pytest

from tests.scale.test_bench_scripts import run_bench

pytestmark = pytest.mark.slow
ITEMS = 100
TOLERATED = 2  # payroll_tolerant: 2 % of its items


def test_fan_out_bench_runs_shrunk_with_refusals_inside_and_past_its_tolerance() -> None:
    summary = run_bench("fan_out.py", "--items", str(ITEMS), timeout=420)
    assert summary["items"] == str(ITEMS) and summary["batches"] == "1"
    # The parent's history holds a few events per batch, never one per item.
    assert int(summary["task_history_events"]) < 30
    assert int(summary["tolerated"]) == TOLERATED
    # As many refused as it tolerates: those undone (nothing was paid to them), the rest paid once.
    within = {k.removeprefix("within_"): v for k, v in summary.items() if k.startswith("within_")}
    assert within == {
        "refused": str(TOLERATED),
        "state": "Processed",
        "processed": str(ITEMS - TOLERATED),
        "compensated": str(TOLERATED),
        "paid": str(ITEMS - TOLERATED),
        "refunded": "0",
        "most_paid_once": "1",
    }
    # One more: the whole task undone, every payment made refunded, none made twice, and the
    # step's counts cover every item (the refused, the undone and any never called).
    assert (summary["past_refused"], summary["past_state"]) == (str(TOLERATED + 1), "Compensated")
    assert summary["past_paid"] == summary["past_refunded"]
    assert int(summary["past_most_paid_once"]) <= 1
    assert int(summary["past_processed"]) == 0
    assert int(summary["past_compensated"]) >= int(summary["past_paid"]) + TOLERATED + 1
