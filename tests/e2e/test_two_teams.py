"""Two teams side by side on one stack, each with a ``flights`` service and a ``booking`` task
type of its own (``tests/e2e/team_north.py``, ``team_south.py``): named under their teams
(``north.flights``, ``south.booking``), each team's service at its own URL
(``SAS_TEAMS__<TEAM>__SERVICES__FLIGHTS__URL``), each task run end to end against its own
team's airline only, each team's alerts at its own webhook only. A real dev server, two real
airlines on loopback (the trip example's services), the worker and the Supervisor; both backends.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from sas.api.client import TaskClient
from sas.settings import get_settings
from sas.settings.services import ServiceSettings
from sas.settings.teams import TeamSettings
from sas.task_models import TaskResult, TaskState
from sas.workflows import registry
from tests.conftest import _example_services
from tests.helpers import fresh_id, wait_until
from tests.stack import start_stack
from tests.stack import test_settings as stack_settings
from tests.supervisor.conftest import rig_settings
from tests.supervisor.test_webhook import serve_hook, webhook  # noqa: F401 - the receivers

pytestmark = pytest.mark.slow

TEAMS = ("north", "south")
TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 2}


@pytest.fixture
def two_teams(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Both teams' packages registered in this process, as their entry points would be."""
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.team_north,tests.e2e.team_south")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest.fixture
def airlines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Each team's own airline: a process of the trip example's services, at a URL of its own."""
    running = [_example_services("sas_trip.services", tmp_path_factory) for _ in TEAMS]
    urls = dict(zip(TEAMS, (next(r) for r in running), strict=True))
    try:
        yield urls
    finally:
        for r in running:
            next(r, None)


async def ledger(url: str, task_id: str) -> list[str]:
    async with httpx.AsyncClient() as http:
        found = (await http.get(f"{url}/ledger", params={"trip": task_id})).json()["entries"]
    return [e["action"] for e in found]


async def scheduled_activities(client: Client, task_id: str) -> list[tuple[str, str]]:
    """(activity type, task queue) of each activity the task's workflow scheduled."""
    history = await client.get_workflow_handle(task_id).fetch_history()
    return [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            e.activity_task_scheduled_event_attributes.task_queue.name,
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and not e.activity_task_scheduled_event_attributes.activity_type.name.startswith("mirror.")
    ]


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
async def test_two_teams_each_with_flights_and_booking_run_side_by_side_and_hear_only_their_own_alerts(  # type: ignore[no-untyped-def]
    two_teams: None,
    airlines: dict[str, str],
    serve_hook,  # noqa: F811
    client: Client,
    temporal_address: str,
    services,
    db_url: str,
) -> None:
    hooks = {team: await serve_hook("ok") for team in (*TEAMS, None)}
    base = stack_settings(temporal_address, services.url, db_url)
    supervisor = rig_settings(base, outcome="park", webhook=webhook(hooks[None][1])).supervisor
    teams = {
        team: TeamSettings(
            webhook=webhook(hooks[team][1]),
            services={"flights": ServiceSettings(url=airlines[team], own_queue=True)},
        )
        for team in TEAMS
    }
    async with start_stack(
        client, temporal_address, services.url, db_url, supervisor_settings=supervisor, teams=teams
    ) as stack:
        tasks = TaskClient(stack.client, stack.settings)
        # One booking of each team's, run end to end: each called its own team's airline only,
        # under its team's names, on its team's service's own queue.
        booked = {team: fresh_id(f"{team}-trip") for team in TEAMS}
        for team, task_id in booked.items():
            await tasks.submit(f"{team}.booking", TRIP, task_id=task_id)
        for team, task_id in booked.items():
            async with asyncio.timeout(90):
                result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
            assert result.state == TaskState.PROCESSED, (team, result)
            other = next(t for t in TEAMS if t != team)
            assert await ledger(airlines[team], task_id) == ["flights.book"]
            assert await ledger(airlines[other], task_id) == []
            queue = f"{stack.settings.temporal.task_queue}.{team}.flights"
            assert await scheduled_activities(stack.client, task_id) == [(f"{team}.flights.book", queue)]
            record = await stack.record(task_id)
            assert record is not None and record.task.task_type == f"{team}.booking"
            described = await stack.client.get_workflow_handle(task_id).describe()
            assert described.workflow_type == f"{team}.BookingWorkflow"

        # A booking each airline refuses for good (no flight goes to Atlantis): parked, as the
        # Supervisor's ladder here ends, and each alert reaches its own team's webhook only.
        refused = {team: fresh_id(f"{team}-atlantis") for team in TEAMS}
        for team, task_id in refused.items():
            await tasks.submit(f"{team}.booking", {**TRIP, "destination": "Atlantis"}, task_id=task_id)

        def received(team: str | None) -> list[dict[str, Any]]:
            return hooks[team][0].accepted()

        await wait_until(
            lambda: _async([received(t) for t in TEAMS]), lambda got: all(got), timeout=120, what="each team's alert"
        )
        for team in TEAMS:
            assert {a["task_id"] for a in received(team)} == {refused[team]}, (team, received(team))
            assert all(a["team"] == team for a in received(team))
        assert not any(a["task_id"] in refused.values() for a in received(None))
        # Each team's breaker is its own service's.
        views = {v.service: v for v in await tasks.services()}
        for team in TEAMS:
            assert views[f"{team}.flights"].queue == f"{stack.settings.temporal.task_queue}.{team}.flights"
        for task_id in refused.values():
            await stack.client.get_workflow_handle(task_id).terminate("test over")


async def _async(value: Any) -> Any:
    return value


def test_sas_types_shows_each_team_s_booking_under_its_name() -> None:
    env = {**os.environ, "SAS_TASK_TYPES__MODULES": "tests.e2e.team_north,tests.e2e.team_south", "PYTHONPATH": "."}
    shown = subprocess.run(["sas", "types", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    found = {t["task_type"]: t for t in json.loads(shown.stdout)}
    for team in TEAMS:
        booking = found[f"{team}.booking"]
        assert booking["workflow_type"] == f"{team}.BookingWorkflow"
        assert [(s["agent"], s["service"]) for s in booking["steps"]] == [(f"{team}.flights.book", f"{team}.flights")]
