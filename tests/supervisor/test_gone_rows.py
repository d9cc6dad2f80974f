"""Rows of tasks whose workflow is gone from Temporal (history expired, namespace reset) hold no
sweep up. They are due for ever (nothing will move them but an operator, whom the orphan check
alerts), and the oldest due rows fill a sweep's batch first: were each sweep to read them again,
as many of them as a batch holds would keep every other due step from its decision."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from sas.state_store.agent_writes import make_step_writer
from sas.state_store.mirror_tables import Step, Task
from sas.task_models import StepState, TaskState
from tests.helpers import fresh_id
from tests.state_store.test_redrive import accepted
from tests.supervisor.conftest import Rig

BATCH = 2


async def test_steps_of_gone_workflows_do_not_keep_a_failed_step_from_its_retry(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(batch_size=BATCH)
    gone = [fresh_id("gone") for _ in range(BATCH + 1)]
    writer = make_step_writer(rig.settings.database)
    try:
        for task_id in gone:
            await writer.accept(accepted(task_id, f"chain-{task_id}"))
    finally:
        await writer.aclose()
    long_ago = datetime.now(UTC) - timedelta(hours=1)  # older than any real step's: first in every batch
    async with rig.sessions() as s, s.begin():
        await s.execute(update(Task).where(Task.task_id.in_(gone)).values(state=TaskState.FAILED))
        await s.execute(
            update(Step)
            .where(Step.task_id.in_(gone), Step.name == "charge")
            .values(state=StepState.FAILED, failure_count=1, complete_by=long_ago)
        )
    await rig.start_supervisor("sup-gone", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("behind-gone")
    await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    # Within a minute (it takes seconds): a Supervisor that read the gone rows again each sweep
    # never reached it.
    result = await asyncio.wait_for((await rig.submit(task_id)).result(), timeout=60)
    assert result.state == TaskState.PROCESSED
    assert [d.kind for d in await rig.decisions(task_id) if d.kind != "wait"] == ["retry"]
    for task_id in gone:  # nothing decided on the mirror's word alone
        assert [d for d in await rig.decisions(task_id) if d.kind != "wait"] == []
