"""A fan-out batch runs only for its task. One started by hand (`temporal workflow start --type
FanOutBatch`, any client of the namespace could) calls nothing and fails, non-retryably, saying
who started it: no payment and no refund reach the payroll service."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.workflow import ParentInfo

from bench._payroll_service import Ledger
from sas.task_models import StepPolicyValues
from sas.task_models.fanout import BATCH_REFUSED, FAN_OUT_BATCH_WORKFLOW, FanOutBatch, FanOutItem
from sas.task_models.queues import service_queue
from sas.workflows.fanout_batch import _not_its_tasks
from tests.fanout.test_fan_out_e2e import payroll, payroll_stack, payroll_type
from tests.helpers import fresh_id

pytestmark = pytest.mark.slow
__all__ = ["payroll", "payroll_type"]  # fixtures, used by name


def batch(task_id: str, *, undo: bool, task_queue: str | None = None) -> FanOutBatch:
    return FanOutBatch(
        task_id=task_id,
        task_type="payroll_run",
        step="pay",
        position=0,
        step_key=f"{task_id}:pay",
        agent="payroll.refund" if undo else "payroll.pay",
        undo=undo,
        task_queue=task_queue,
        policy=StepPolicyValues(),
        max_concurrency=2,
        items=[FanOutItem(key="mallory", item={"id": "mallory", "cents": 100_000})],
    )


def test_a_batch_answers_only_to_its_task_s_scheduler_or_its_clean_up() -> None:
    def parent(workflow_id: str) -> ParentInfo:
        return ParentInfo(namespace="default", run_id="r", workflow_id=workflow_id)

    assert _not_its_tasks(batch("t-1", undo=False), parent("t-1")) is None
    assert _not_its_tasks(batch("t-1", undo=True), parent("t-1")) is None
    assert _not_its_tasks(batch("t-1", undo=True), parent("cleanup-t-1")) is None
    # A clean-up undoes; it never pays.
    assert "started by workflow cleanup-t-1" in str(_not_its_tasks(batch("t-1", undo=False), parent("cleanup-t-1")))
    assert "started by workflow my-own" in str(_not_its_tasks(batch("t-1", undo=True), parent("my-own")))
    assert "started by hand" in str(_not_its_tasks(batch("t-1", undo=False), None))


@pytest.mark.parametrize("undo", [False, True], ids=["pay", "refund"])
async def test_a_batch_started_by_hand_calls_nothing(
    undo: bool,
    payroll_type: None,
    payroll: tuple[str, Ledger],
    client: Client,
    temporal_address: str,
    services: Any,
    sqlite_url: str,
) -> None:
    url, ledger = payroll
    async with payroll_stack(url, client, temporal_address, services, sqlite_url) as stack:
        queue = stack.settings.temporal.task_queue
        forged = batch(fresh_id("payroll-forged"), undo=undo, task_queue=service_queue(queue, "payroll"))
        handle = await stack.client.start_workflow(
            FAN_OUT_BATCH_WORKFLOW, forged, id=f"{forged.step_key}:batch-1", task_queue=queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    cause = failed.value.cause
    assert getattr(cause, "type", None) == BATCH_REFUSED
    assert "was started by no workflow (it was started by hand)" in str(cause)
    assert ledger.entries == [] and ledger.lookups == []
