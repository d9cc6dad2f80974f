"""A workflow terminated from outside is cleaned up at the next orphan check, not when its task's
turn comes among the quiet open tasks (at 100,000 open tasks, hours away): the Supervisor asks
Temporal's visibility for the workflows closed since its last look (``detect/closed.py``). Here
the quiet tasks' turn never comes (``ORPHAN_AFTER_S`` an hour), so only that look can find it."""

from __future__ import annotations

import asyncio
import subprocess

from tests.conftest import temporal_binary
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig


async def test_a_workflow_terminated_from_outside_is_cleaned_up_at_the_next_check(make_rig) -> None:  # type: ignore[no-untyped-def]
    rig: Rig = await make_rig(orphan_after_s=3600.0)
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
    await wait_until(lambda: rig.task_state(task_id), lambda s: s == "Compensated", timeout=60, what="clean-up done")
    assert [(d.kind, d.step) for d in await rig.decisions(task_id) if d.kind == "cleanup"] == [("cleanup", "-")]
    alerts = [a for a in await rig.alerts(task_id) if a.kind == "workflow_closed"]
    assert len(alerts) == 1 and "terminated" in alerts[0].message
