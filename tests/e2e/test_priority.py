"""Priority and fair share: a task's priority, given at submit, is Temporal's task priority, and
its type's team (or tenant) its fairness key, with the team's weight; every start path carries
both (submit from the CLI and the client, reschedule, resubmit one task or in bulk, a
schedule's runs), and the step's activities inherit them. On the tests' dev server (one
partition a queue, tests/conftest.py) an urgent task overtakes a backlog; team B's task not
waiting behind team A's is tests/e2e/test_fair_shares.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client

from sas.api.client import Selection, TaskClient
from sas.settings import get_settings
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order, start_stack
from tests.stack import test_settings as stack_settings

BACKLOG = 20


@pytest.fixture
def team_types(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two teams' order types registered in this process, and team A's weight set."""
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.teams")
    monkeypatch.setenv("SAS_TEAMS__TEAM_A__WEIGHT", "3")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


async def priority_of(client: Client, task_id: str) -> tuple[int, str, float]:
    """The priority key, fairness key and weight the task's current run was started with."""
    described = await client.get_workflow_handle(task_id).describe()
    given = described.raw_description.workflow_execution_info.priority
    return given.priority_key, given.fairness_key, round(given.fairness_weight, 3)


async def test_sas_submit_priority_reaches_temporal(stack: Stack) -> None:
    task_id = fresh_id("prio-cli")
    done = await sas(stack, "submit", "--id", task_id, "--priority", "1", *ORDER_FLAGS, "--json")
    assert done.returncode == 0, done.stderr
    assert as_json(done)["task_id"] == task_id

    # The order example names no team: no fairness key.
    assert await priority_of(stack.client, task_id) == (1, "", 0.0)
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == TaskState.PROCESSED


async def test_sas_submit_refuses_a_priority_out_of_range(stack: Stack) -> None:
    done = await sas(stack, "submit", "--priority", "9", *ORDER_FLAGS)
    assert done.returncode != 0
    assert "--priority must be 1 (most urgent) to 5 (least), got 9" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


async def test_a_teams_submit_carries_its_fairness_key_and_weight(team_types: None, stack: Stack) -> None:
    task_id = fresh_id("team-cli")
    flags = [*ORDER_FLAGS[2:], "--type", "team_a.order"]
    done = await sas(stack, "submit", "--id", task_id, "--priority", "2", *flags, "--json")
    assert done.returncode == 0, done.stderr
    assert await priority_of(stack.client, task_id) == (2, "team_a", 3.0)

    tasks = TaskClient(stack.client, stack.settings)
    tenant = (await tasks.submit("team_b.order", order(customer_id="acme"), priority=4)).task_id
    assert await priority_of(stack.client, tenant) == (4, "team_b/acme", 0.0)  # team B has no weight set
    assert (await tasks.result(tenant)).state == TaskState.PROCESSED


async def test_a_steps_activities_inherit_the_tasks_fairness_key(team_types: None, stack: Stack) -> None:
    task_id = fresh_id("team-held")
    fault = await stack.add_fault(
        endpoint="inventory.reserve", kind="latency", latency_ms=30_000, match_order_id=task_id
    )
    tasks = TaskClient(stack.client, stack.settings)
    await tasks.submit("team_a.order", order(), task_id=task_id, priority=2)

    async def pending() -> list[Any]:
        described = await stack.client.get_workflow_handle(task_id).describe()
        return [a for a in described.raw_description.pending_activities if a.activity_type.name == "inventory.reserve"]

    held = await wait_until(pending, what="the reserve call in flight")
    try:
        # Temporal's rule: an activity's empty priority fields are its workflow's (the Scheduler
        # sets none of its own), so the call runs with the task's key and weight. Describe shows
        # only what the activity set itself: nothing here, the workflow's priority.
        assert (held[0].priority.priority_key, held[0].priority.fairness_key) == (0, "")
        history = await stack.client.get_workflow_handle(task_id).fetch_history()
        scheduled = [
            e.activity_task_scheduled_event_attributes.priority
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert scheduled and all((p.priority_key, p.fairness_key) == (0, "") for p in scheduled)
        assert await priority_of(stack.client, task_id) == (2, "team_a", 3.0)
    finally:
        await stack.remove_fault(fault)
    assert (await tasks.result(task_id)).state == TaskState.PROCESSED


async def test_a_reschedule_and_a_schedules_runs_keep_the_priority_and_fairness_key(
    team_types: None, stack: Stack
) -> None:
    tasks = TaskClient(stack.client, stack.settings)
    task_id = (await tasks.submit("team_a.order", order(), delay=timedelta(hours=1), priority=2)).task_id
    first = (await stack.client.get_workflow_handle(task_id).describe()).run_id
    await tasks.reschedule(task_id, timedelta(hours=2), reason="later")
    assert (await stack.client.get_workflow_handle(task_id).describe()).run_id != first
    assert await priority_of(stack.client, task_id) == (2, "team_a", 3.0)
    await tasks.cancel(task_id, reason="test over")

    schedule_id = fresh_id("team-nightly")
    await tasks.create_schedule(schedule_id, "team_a.order", order(), every="1d", priority=2)
    try:
        action = (await stack.client.get_schedule_handle(schedule_id).describe()).schedule.action
        given = getattr(action, "priority", None)
        assert given is not None
        assert (given.priority_key, given.fairness_key, given.fairness_weight) == (2, "team_a", 3.0)
    finally:
        await tasks.delete_schedule(schedule_id)


async def test_a_resubmission_one_task_or_in_bulk_keeps_the_priority_and_fairness_key(
    team_types: None, stack: Stack
) -> None:
    tasks = TaskClient(stack.client, stack.settings)
    ids = [fresh_id("team-declined") for _ in range(2)]
    faults = [
        await stack.add_fault(endpoint="shipping.ship", kind="permanent", status=422, error="no", match_order_id=t)
        for t in ids
    ]
    for task_id in ids:
        await tasks.submit("team_a.order", order(), task_id=task_id, priority=2)
    for task_id in ids:
        assert (await tasks.result(task_id)).state == TaskState.COMPENSATED
    for fault in faults:
        await stack.remove_fault(fault)

    one, other = ids
    await tasks.resubmit(one, reason="address fixed")
    done = await tasks.bulk(
        "resubmit", Selection(limit=10, task_states=("Compensated",), task_type="team_a.order"), reason="fixed"
    )
    assert [(r.task_id, r.outcome) for r in done.results] == [(other, "ok")]
    for task_id in ids:
        assert await priority_of(stack.client, task_id) == (2, "team_a", 3.0)
        assert (await tasks.result(task_id)).state == TaskState.PROCESSED


async def test_an_urgent_task_overtakes_a_backlog(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    """The backlog and the urgent task are all queued before any worker polls, and the worker
    takes one activity at a time: what it is handed first is the matcher's order, not arrival."""
    settings = stack_settings(temporal_address, services.url, sqlite_url)
    tasks = TaskClient(client, settings)
    backlog = [(await tasks.submit("order", order())).task_id for _ in range(BACKLOG)]
    urgent = (await tasks.submit("order", order(), priority=1)).task_id
    one_at_a_time = {"max_concurrent_activities": 1, "max_concurrent_workflow_tasks": 2}
    async with start_stack(
        client,
        temporal_address,
        services.url,
        sqlite_url,
        supervisor=False,
        temporal=settings.temporal,
        worker_options=one_at_a_time,
    ):
        closed = {t: await closed_at(client, t) for t in [*backlog, urgent]}
    before = sum(1 for t in backlog if closed[t] < closed[urgent])
    assert before < BACKLOG // 4, f"{before} of the {BACKLOG} queued before it completed first"


async def closed_at(client: Client, task_id: str) -> Any:
    handle = client.get_workflow_handle(task_id, result_type=TaskResult)
    assert (await handle.result()).state == TaskState.PROCESSED
    return (await handle.describe()).close_time
