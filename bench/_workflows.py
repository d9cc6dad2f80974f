"""Bench-only workflows, on the same three remote calls as OrderWorkflow:

- ``BenchBareOrder``: three activities, nothing else (the baseline; also what the
  projector design runs, since it moves the mirror out of the workflow entirely);
- ``BenchLaOrder``: design (a), one local activity per step transition;
- ``BenchBatchOrder``: design (c), the transitions of one workflow task batched into
  one local activity;
- ``BenchBareQueuesOrder``: the baseline with sas's task-queue layout, each activity on its
  service's own queue (``<workflow queue>.<service>``), so a comparison can tell what that
  layout costs Temporal from what the pattern costs.

Payloads are plain dicts so that nothing heavy is imported into the sandbox.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

STEPS = (("reserve", "bench.reserve"), ("charge", "bench.charge"), ("ship", "bench.ship"))
# The remote service each bench activity calls, as sas's Agents name theirs (task_models/queues.py).
SERVICE = {"bench.reserve": "inventory", "bench.charge": "payment", "bench.ship": "shipping"}
_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=0.5),
    backoff_coefficient=2,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=3,
)
_COMPLETE_BY = timedelta(seconds=10)
_LA: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=15),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}


def _call(order: dict[str, Any], step: str) -> dict[str, Any]:
    info = workflow.info()
    return {"task_id": info.workflow_id, "key": f"{info.workflow_id}:{step}", "payload": order}


async def _step(order: dict[str, Any], step: str, activity: str, task_queue: str | None = None) -> Any:
    return await workflow.execute_activity(
        activity, _call(order, step), start_to_close_timeout=_COMPLETE_BY, retry_policy=_RETRY, task_queue=task_queue
    )


def _t(step: str, state: str, seq: int, task_state: str | None = None) -> dict[str, Any]:
    return {
        "task_id": workflow.info().workflow_id,
        "step": step,
        "state": state,
        "seq": seq,
        "at": workflow.now().isoformat(),
        "task_state": task_state,
    }


@workflow.defn(name="BenchBareOrder")
class BenchBareOrder:
    @workflow.run
    async def run(self, order: dict[str, Any]) -> str:
        for step, activity in STEPS:
            await _step(order, step, activity)
        return "Processed"


@workflow.defn(name="BenchBareQueuesOrder")
class BenchBareQueuesOrder:
    @workflow.run
    async def run(self, order: dict[str, Any]) -> str:
        queue = workflow.info().task_queue
        for step, activity in STEPS:
            # sas.task_models.queues.service_queue's naming, written out: importing it would load
            # sas.task_models (pydantic models) into the stock sandbox at every run of the baseline.
            await _step(order, step, activity, f"{queue}.{SERVICE[activity]}")
        return "Processed"


@workflow.defn(name="BenchLaOrder")
class BenchLaOrder:
    """(a) a local activity per transition: accept, then Processing and Processed of each step."""

    @workflow.run
    async def run(self, order: dict[str, Any]) -> str:
        info = workflow.info()
        await workflow.execute_local_activity(
            "bench.mirror_accept",
            {"task_id": info.workflow_id, "payload": order, "at": workflow.now().isoformat()},
            **_LA,
        )
        seq = 0
        for i, (step, activity) in enumerate(STEPS):
            seq += 1
            await workflow.execute_local_activity(
                "bench.mirror_record", [_t(step, "Processing", seq, "Processing")], **_LA
            )
            await _step(order, step, activity)
            seq += 1
            last = i == len(STEPS) - 1
            await workflow.execute_local_activity(
                "bench.mirror_record", [_t(step, "Processed", seq, "Processed" if last else None)], **_LA
            )
        return "Processed"


@workflow.defn(name="BenchBatchOrder")
class BenchBatchOrder:
    """(c) transitions batched per workflow task: what one workflow task decides (Processed of
    one step and Processing of the next) is written in one local activity before the
    next activity is scheduled. The accept carries the first Processing."""

    @workflow.run
    async def run(self, order: dict[str, Any]) -> str:
        info = workflow.info()
        pending: list[dict[str, Any]] = []
        seq = 0
        for i, (step, activity) in enumerate(STEPS):
            seq += 1
            pending.append(_t(step, "Processing", seq, "Processing"))
            if i == 0:
                await workflow.execute_local_activity(
                    "bench.mirror_accept",
                    {"task_id": info.workflow_id, "payload": order, "at": workflow.now().isoformat(), "then": pending},
                    **_LA,
                )
            else:
                await workflow.execute_local_activity("bench.mirror_record", pending, **_LA)
            pending = []
            await _step(order, step, activity)
            seq += 1
            pending.append(_t(step, "Processed", seq, "Processed" if i == len(STEPS) - 1 else None))
        await workflow.execute_local_activity("bench.mirror_record", pending, **_LA)
        return "Processed"


BENCH_WORKFLOWS = [BenchBareOrder, BenchBareQueuesOrder, BenchLaOrder, BenchBatchOrder]
