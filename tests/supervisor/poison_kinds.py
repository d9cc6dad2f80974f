"""Task types whose ``status`` query a Supervisor cannot read, each of them waiting quietly for an
approval (registered by tests/supervisor/test_poison_isolation.py):

- one whose query fails (a bug in the type's code, or an answer it cannot encode);
- one whose answer is larger than a gRPC message may be (about 4 MB);
- one the test's second worker build no longer registers (its query: "not registered").
"""

from __future__ import annotations

import base64
import hashlib
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult, TaskStatus
    from sas.workflows.definitions import TaskDefinition, Wait
    from sas.workflows.scheduler import TaskScheduler
    from sas_orders.models import OrderInput
    from sas_orders.steps import CHARGE, RESERVE

# Waits for an approval no test reaches: the task stays open and quiet, so every orphan check looks at it.
_WAITING = (Wait("approval", signal="approve", deadline=timedelta(minutes=10)), RESERVE, CHARGE)
# Past the 4 MB a gRPC message may carry by default, even after sas's payload compression: the
# characters are the base64 of a hash stream, which compresses by about a quarter, not away.
_TOO_LARGE_CHARS = 8_000_000


def _incompressible(chars: int) -> str:
    return base64.b64encode(hashlib.shake_256(b"too large").digest(chars * 3 // 4)).decode()


@workflow.defn(name="FailingStatusOrderWorkflow")
class FailingStatusOrderWorkflow(TaskScheduler):
    definition = TaskDefinition("failing_status_order", OrderInput, _WAITING)

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)

    @workflow.query(name="status")
    def status(self) -> TaskStatus:
        raise RuntimeError("this type's status cannot be shown")


@workflow.defn(name="HugeStatusOrderWorkflow")
class HugeStatusOrderWorkflow(TaskScheduler):
    definition = TaskDefinition("huge_status_order", OrderInput, _WAITING)

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)

    @workflow.query(name="status")
    def status(self) -> TaskStatus:
        return super().status().model_copy(update={"events": [_incompressible(_TOO_LARGE_CHARS)]})


@workflow.defn(name="RetiredOrderWorkflow")
class RetiredOrderWorkflow(TaskScheduler):
    definition = TaskDefinition("retired_order", OrderInput, _WAITING)

    @workflow.run
    async def run(self, order: RawValue) -> TaskResult:
        return await self.execute(order)
