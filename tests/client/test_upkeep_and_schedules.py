"""What ``sas schedule``, ``sas reconcile`` and ``sas health`` do, called from a team's own code
through ``TaskClient``: typed views back, typed errors for what a caller can act on. Real dev
server, real state store."""

from __future__ import annotations

import pytest

from sas.api.client import InvalidInput, TaskClient, TaskIdTaken, TaskNotFound
from sas.client.errors import Unhealthy
from sas.client.schedules import ScheduleView
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


async def test_a_schedule_is_created_listed_paused_and_deleted(stack: Stack) -> None:
    tasks = TaskClient(stack.client, stack.settings)
    schedule_id = fresh_id("client-sched")

    created = await tasks.create_schedule(schedule_id, "order", order(), every="1d", priority=2)
    assert (created.schedule_id, created.done) == (schedule_id, "created")
    with pytest.raises(TaskIdTaken, match="already exists"):
        await tasks.create_schedule(schedule_id, "order", order(), every="1d")

    paused = await tasks.pause_schedule(schedule_id, reason="stock take")
    assert paused.done == "paused"

    async def listed() -> list[ScheduleView]:
        return [s for s in await tasks.schedules() if s.schedule_id == schedule_id]

    # The list is Temporal's visibility, which sees a pause a moment after it is made.
    [seen] = await wait_until(listed, lambda found: bool(found) and found[0].paused, what="the pause listed")
    assert seen.next_runs and seen.data["id"] == schedule_id and seen.data["paused"] is True
    assert (await tasks.unpause_schedule(schedule_id)).done == "unpaused"

    assert (await tasks.delete_schedule(schedule_id)).done == "deleted"
    with pytest.raises(TaskNotFound, match="no schedule"):
        await tasks.delete_schedule(schedule_id)


async def test_a_schedule_outside_its_bounds_is_refused_before_temporal_is_asked(stack: Stack) -> None:
    # No Temporal client: a refusal must come from the checks alone.
    tasks = TaskClient(None, stack.settings)
    with pytest.raises(InvalidInput, match="never fires") as never:
        await tasks.create_schedule("nightly", "order", order(), cron="0 0 31 2 *")
    assert never.value.field == "cron"
    with pytest.raises(InvalidInput, match="at least 1m between runs"):
        await tasks.create_schedule("nightly", "order", order(), every="1s")
    with pytest.raises(InvalidInput, match="exactly one of"):
        await tasks.create_schedule("nightly", "order", order(), cron="@daily", every="1d")
    with pytest.raises(InvalidInput, match="unknown task type"):
        await tasks.create_schedule("nightly", "no-such-type", {}, every="1d")


async def test_reconcile_says_what_temporal_says_of_each_task(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings)
    task_id = fresh_id("client-reconcile")
    await tasks.submit("order", order(), task_id=task_id)
    await tasks.result(task_id)

    done = await tasks.reconcile(task_id, dry_run=True)
    [one] = done.tasks
    assert (one.task_id, one.temporal, one.repairs, done.repaired) == (task_id, "completed", [], 0)
    unknown = fresh_id("client-unknown")
    assert (await tasks.reconcile(unknown)).tasks[0].temporal == "no such task in the state store"
    with pytest.raises(InvalidInput, match="limit"):
        await tasks.reconcile(limit=0)


async def test_health_of_a_supervisor_that_is_not_there_is_unhealthy(stack_no_supervisor: Stack) -> None:
    tasks = TaskClient(stack_no_supervisor.client, stack_no_supervisor.settings)
    with pytest.raises(Unhealthy, match="unhealthy: no supervisor of host"):
        await tasks.health("supervisor")
    with pytest.raises(InvalidInput, match="unknown role"):
        await tasks.health("scheduler")  # type: ignore[arg-type]
