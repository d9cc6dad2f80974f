"""The failure matrix over a type with a fan-out: its items refused within the tolerance (the
task goes on) and past it (undone as a whole), a later step refused (every item undone once,
latest first), and an item's undo refused (retried once an operator says so)."""

from __future__ import annotations

import pytest

from bench._payroll import PayrollRunWorkflow
from sas.api.testing import check_failure_matrix, time_skipping_environment

ANSWERS = {"payroll.pay": {"payment_id": "p"}, "payroll.report": {"report_id": "r"}}


@pytest.mark.parametrize("items", [2, 5], ids=["within-the-tolerance", "past-it"])
async def test_every_failure_point_of_a_fan_out_keeps_the_promise(items: int) -> None:
    env = await time_skipping_environment()
    try:
        recipients = [{"id": f"emp{n}", "cents": 100 + n} for n in range(items)]
        await check_failure_matrix(env, PayrollRunWorkflow, {"recipients": recipients}, answers=ANSWERS)
    finally:
        await env.shutdown()
