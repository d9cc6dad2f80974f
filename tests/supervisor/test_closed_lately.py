"""A workflow terminated from outside is cleaned up once its task is quiet, not when its turn comes
among every quiet open task (at 100,000 open tasks, hours away): the Supervisor asks Temporal's
visibility for the workflows closed since its last look and checks those first
(``detect/closed.py``). Here a hundred quiet open tasks whose workflows are gone are ahead of it
in the orphan check's turn, one a round."""

from __future__ import annotations

import asyncio
import subprocess
from datetime import UTC, datetime, timedelta

from sqlalchemy import update

from sas.state_store.agent_writes import make_step_writer
from sas.state_store.mirror_tables import Task
from sas.task_models import TaskState
from tests.conftest import temporal_binary
from tests.helpers import fresh_id, wait_until
from tests.state_store.test_redrive import accepted
from tests.supervisor.conftest import Rig

AHEAD = 100


async def test_a_workflow_terminated_from_outside_is_cleaned_up_before_its_turn(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(orphan_batch=1)
    ahead = [fresh_id("gone-ahead") for _ in range(AHEAD)]
    writer = make_step_writer(rig.settings.database)
    try:
        for task_id in ahead:
            await writer.accept(accepted(task_id, f"chain-{task_id}"))
    finally:
        await writer.aclose()
    long_ago = datetime.now(UTC) - timedelta(hours=1)  # quiet for longer than any real task: first in turn
    async with rig.sessions() as s, s.begin():
        await s.execute(
            update(Task).where(Task.task_id.in_(ahead)).values(state=TaskState.PROCESSING, updated_at=long_ago)
        )
    await rig.start_supervisor("sup-closed", rig.settings.supervisor.workflow_id)
    task_id = fresh_id("closed-lately")
    await rig.add_fault(endpoint="shipping.ship", kind="hang", hang_s=120, match_order_id=task_id)
    await rig.submit(task_id)
    await wait_until(lambda: rig.step_states(task_id), lambda s: s.get("ship") == "Processing", what="ship in flight")
    done = await asyncio.to_thread(
        subprocess.run,
        [temporal_binary(), "workflow", "terminate", "--workflow-id", task_id, "--reason", "from the UI",
         "--address", rig.settings.temporal.address],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    await wait_until(lambda: rig.task_state(task_id), lambda s: s == "Compensated", timeout=120, what="clean-up done")
    # In turn, all hundred would have been looked at (and alerted as gone) first.
    looked_at = [t for t in ahead if await rig.alerts(t)]
    assert len(looked_at) < AHEAD, "the terminated task waited for its turn behind every quiet task"
    assert [(d.kind, d.step) for d in await rig.decisions(task_id) if d.kind == "cleanup"] == [("cleanup", "-")]
    alerts = [a for a in await rig.alerts(task_id) if a.kind == "workflow_closed"]
    assert len(alerts) == 1 and "terminated" in alerts[0].message
