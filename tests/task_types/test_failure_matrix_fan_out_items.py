"""The failure matrix refuses one item of each fan-out, besides every item: within the tolerance
the task goes on with every other item done; with no tolerance the one refusal undoes the task."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from bench._payroll import PayrollBatchWorkflow, PayrollRunWorkflow
from sas.api.testing import check_failure_matrix, time_skipping_environment

ANSWERS = {"payroll.pay": {"payment_id": "p"}, "payroll.report": {"report_id": "r"}}
THREE = {"recipients": [{"id": f"emp{n}", "cents": 100 + n} for n in range(3)]}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


async def test_one_item_refused_within_the_tolerance_leaves_the_others_done(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(env, PayrollRunWorkflow, THREE, answers=ANSWERS)
    (one,) = [c for c in cases if c.name == "pay's item emp0 refused"]
    assert one.outcome == "Processed" and one.passed
    assert sorted(one.done) == ["payroll.pay", "payroll.pay", "payroll.report"] and one.undone == []


async def test_one_item_refused_with_no_tolerance_undoes_the_task(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(env, PayrollBatchWorkflow, THREE, answers=ANSWERS)
    (one,) = [c for c in cases if c.name == "pay's item emp0 refused"]
    assert one.outcome == "Compensated" and one.passed
    assert one.undone == ["payroll.refund"] * len(one.done)
