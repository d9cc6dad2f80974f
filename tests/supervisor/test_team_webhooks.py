"""Alerts to their owners: each alert is sent to the webhook of the team that owns its task's
type (``SAS_TEAMS__<TEAM>__WEBHOOK__URL``), the rest to the platform's
(``SAS_SUPERVISOR__WEBHOOK__URL``); no team's alert reaches another's. ``sas alerts``,
``sas incidents`` and ``sas list`` take ``--team`` (``TaskClient``), and a sent alert names its team.
Real receivers on loopback, a dev server, the order example's steps as two teams' types."""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.client import Client

from sas.api.client import TaskClient
from sas.client.errors import InvalidInput
from sas.settings import SupervisorSettings
from sas.settings.teams import TeamSettings
from tests.e2e.test_priority import team_types  # noqa: F401 - the two teams' types, registered here
from tests.helpers import fresh_id, wait_until
from tests.stack import order, start_stack
from tests.stack import test_settings as stack_settings
from tests.supervisor.conftest import rig_settings
from tests.supervisor.test_webhook import serve_hook, verified, webhook  # noqa: F401 - the receivers

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]

TYPES = {"team_a": "team_a.order", "team_b": "team_b.order", None: "order"}


async def test_each_team_s_alerts_reach_only_its_own_webhook(  # type: ignore[no-untyped-def]
    team_types: None,  # noqa: F811
    serve_hook,  # noqa: F811
    client: Client,
    temporal_address: str,
    services,
    db_url: str,
) -> None:
    hooks = {team: await serve_hook("ok") for team in TYPES}
    base = stack_settings(temporal_address, services.url, db_url)
    supervisor: SupervisorSettings = rig_settings(base, outcome="park", webhook=webhook(hooks[None][1])).supervisor
    teams = {team: TeamSettings(webhook=webhook(hooks[team][1])) for team in ("team_a", "team_b")}
    async with start_stack(
        client, temporal_address, services.url, db_url, supervisor_settings=supervisor, teams=teams
    ) as stack:
        tasks = TaskClient(stack.client, stack.settings)
        ids: dict[str | None, str] = {}
        for team, task_type in TYPES.items():
            task_id = fresh_id(f"owned-{team or 'platform'}".replace("_", "-"))
            await stack.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id)
            await tasks.submit(task_type, order(), task_id=task_id)
            ids[team] = task_id

        def received(team: str | None) -> list[dict[str, Any]]:
            return hooks[team][0].accepted()

        async def all_three() -> list[list[dict[str, Any]]]:
            return [received(t) for t in TYPES]

        await wait_until(all_three, lambda got: all(got), timeout=120, what="each webhook's alert")
        for team in TYPES:
            got = received(team)
            # Only its own tasks' alerts, each saying whose it is, signed with its own hook's secret.
            assert {a["task_id"] for a in got} == {ids[team]}, (team, got)
            assert all(a["team"] == team for a in got)
            assert all(verified(h, body) for h, body, _ in hooks[team][0].received)

        # A team's operator sees only its team's, through the client and the CLI alike.
        mine = await tasks.alerts("all", team="team_a")
        assert {a.task_id for a in mine.alerts} == {ids["team_a"]}
        everyone = await tasks.alerts("all")
        assert {a.task_id for a in everyone.alerts} >= set(ids.values())
        listed = await tasks.list(team="team_b")
        assert [t.task_id for t in listed.tasks] == [ids["team_b"]]
        assert await tasks.incidents("all", team="team_b") == []
        with pytest.raises(InvalidInput, match="no task type of this deployment belongs to it"):
            await tasks.alerts("all", team="team_c")
        for task_id in ids.values():
            await stack.client.get_workflow_handle(task_id).terminate("test over")
        print(json.dumps({t or "platform": len(received(t)) for t in TYPES}))
