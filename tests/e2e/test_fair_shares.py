"""Fair shares: team B's one task is not stuck behind team A's backlog. The backlog and B's task
are all queued before any worker polls, and the worker takes one activity at a time, so what it
is handed first is the matcher's order: with each task carrying its team as its fairness key,
the teams are served in turn; without keys, in arrival order (B's last). And what ``sas show``
and ``sas types`` say of a task's share."""

from __future__ import annotations

from temporalio.client import Client

from sas.api.client import TaskClient
from sas.task_models import TaskState
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import as_json, sas
from tests.e2e.test_priority import closed_at, team_types
from tests.stack import Stack, order, start_stack
from tests.stack import test_settings as stack_settings

BACKLOG = 30

__all__ = ["team_types"]  # the fixture, shared with test_priority.py


async def test_team_bs_task_is_not_stuck_behind_team_as_backlog(
    team_types: None, client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    settings = stack_settings(temporal_address, services.url, sqlite_url)
    tasks = TaskClient(client, settings)
    backlog = [(await tasks.submit("team_a.order", order())).task_id for _ in range(BACKLOG)]
    team_b = (await tasks.submit("team_b.order", order(customer_id="acme"))).task_id
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
        closed = {t: await closed_at(client, t) for t in [*backlog, team_b]}
    before = sum(1 for t in backlog if closed[t] < closed[team_b])
    assert before < BACKLOG // 3, f"{before} of team A's {BACKLOG} queued before it completed first"


async def test_sas_show_and_sas_types_say_the_team_key_weight_and_priority(team_types: None, stack: Stack) -> None:
    tasks = TaskClient(stack.client, stack.settings)
    task_id = (await tasks.submit("team_a.order", order(), priority=2)).task_id
    assert (await tasks.result(task_id)).state == TaskState.PROCESSED
    shown = await sas(stack, "show", task_id, "--share", "--json")
    assert shown.returncode == 0, shown.stderr
    assert as_json(shown)["share"] == {"priority": 2, "team": "team_a", "fairness_key": "team_a", "weight": 3.0}
    told = await sas(stack, "show", task_id, "--share")
    assert "priority 2, team team_a, fairness key team_a, weight 3.0" in told.stdout
    assert "share" not in as_json(await sas(stack, "show", task_id, "--json"))  # the state store's alone

    plain = (await tasks.submit("order", order())).task_id  # a type with no team: no key, the default priority
    assert (await tasks.result(plain)).state == TaskState.PROCESSED
    assert as_json(await sas(stack, "show", plain, "--share", "--json"))["share"] == {
        "priority": 3,
        "team": None,
        "fairness_key": None,
        "weight": None,
    }

    described = as_json(await sas(stack, "types", "team_b.order", "--json"))
    assert described[0]["share"] == {"team": "team_b", "fairness_key": "team_b/<customer_id>", "weight": None}
    listed = await sas(stack, "types", "team_a.order")
    assert "team team_a, fairness key team_a, weight 3.0" in listed.stdout
