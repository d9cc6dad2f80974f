"""The chaos run's fan-out and child types (bench/_chaos_shapes.py) keep the promise at every
failure point on their own, in the time-skipping environment with fake Agents (sas.api's failure
matrix): so what the chaos run finds under faults is the stack's doing, not a flaw of a type."""

from __future__ import annotations

from bench._chaos_shape_plan import fan_out_input
from bench._chaos_shapes import ChaosChildWorkflow, ChaosPayrollWorkflow
from sas.api.testing import check_failure_matrix, time_skipping_environment


async def test_the_chaos_fan_out_and_child_survive_every_failure_point() -> None:
    env = await time_skipping_environment()
    try:
        payroll = await check_failure_matrix(
            env,
            ChaosPayrollWorkflow,
            fan_out_input(0),
            answers={"chaos_wages.pay": {"payment_id": "pay_1"}, "chaos_filing.file": {"filing_id": "fil_1"}},
        )
        child = await check_failure_matrix(
            env,
            ChaosChildWorkflow,
            {"parcel": "p", "destination": "town-0"},
            answers={"chaos_courier.deliver": {"delivery_id": "dlv_1"}},
        )
    finally:
        await env.shutdown()
    assert {c.name: c.outcome for c in payroll}["nothing fails"] == "Processed"
    assert {c.name: c.outcome for c in child}["nothing fails"] == "Processed"
