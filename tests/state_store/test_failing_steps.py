"""The failing steps the incident check groups (``failing_steps``): those of open tasks only, on
each backend. A task that finished (Processed, or undone: Compensated) leaves its failed step's
row behind, and must not keep an incident open."""

from __future__ import annotations

from sqlalchemy import update

from sas.state_store.alerts import failing_steps
from sas.state_store.mirror_tables import Step, Task
from sas.task_models import StepState, TaskState
from tests.helpers import fresh_id
from tests.state_store.test_redrive import accepted

FAILING = (StepState.FAILED, StepState.ERROR)


async def test_only_open_tasks_failing_steps_are_read(sessions, writer) -> None:  # type: ignore[no-untyped-def]
    ids = {state: fresh_id(f"failing-{state.lower()}") for state in (TaskState.FAILED, TaskState.PROCESSED, "Undone")}
    for n, task_id in enumerate(ids.values()):
        await writer.accept(accepted(task_id, f"chain-{n}-{task_id}"))
    finished = {ids[TaskState.PROCESSED]: TaskState.PROCESSED, ids["Undone"]: TaskState.COMPENSATED}
    async with sessions() as s, s.begin():
        await s.execute(
            update(Step).where(Step.task_id.in_(list(ids.values())), Step.name == "charge").values(state="Failed")
        )
        await s.execute(update(Task).where(Task.task_id == ids[TaskState.FAILED]).values(state=TaskState.FAILED))
        for task_id, state in finished.items():
            await s.execute(update(Task).where(Task.task_id == task_id).values(state=state))
    async with sessions() as s:
        found = {(f.task_id, f.step) for f in await failing_steps(s, FAILING, 1000)}
    assert (ids[TaskState.FAILED], "charge") in found
    assert not {task_id for task_id, _ in found} & set(finished)
