"""A team's operator limited to its team's tasks: a ``TaskClient`` of one team (``team=``, or
``SAS_OPERATOR__TEAM`` for ``sas``) acts on, shows and lists that team's tasks only, refuses
another team's with ``OutsideTeam`` before anything is sent, and each audit entry names the team.
A dev server, the order example's steps as two teams' types (``tests/e2e/teams.py``)."""

from __future__ import annotations

import functools

import pytest
from temporalio.client import Client

from sas.api.client import OutsideTeam, Selection, TaskClient, TaskNotFound
from sas.client.story import TaskStory
from tests.cli.test_cli import sas
from tests.e2e.test_priority import team_types  # noqa: F401 - the two teams' types, registered here
from tests.helpers import fresh_id, wait_until
from tests.stack import order, start_stack
from tests.stack import test_settings as stack_settings
from tests.supervisor.conftest import rig_settings

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)]


async def test_a_team_s_operator_acts_on_its_team_s_tasks_only_and_is_audited_as_the_team(  # type: ignore[no-untyped-def]
    team_types: None,  # noqa: F811
    client: Client,
    temporal_address: str,
    services,
    db_url: str,
) -> None:
    base = stack_settings(temporal_address, services.url, db_url)
    supervisor = rig_settings(base, outcome="park").supervisor
    async with start_stack(client, temporal_address, services.url, db_url, supervisor_settings=supervisor) as stack:
        platform = TaskClient(stack.client, stack.settings)
        team_a = TaskClient(stack.client, stack.settings, actor="ada", team="team_a")
        ours, theirs = fresh_id("team-a-task"), fresh_id("team-b-task")
        faults = {}
        for task_id, task_type in ((ours, "team_a.order"), (theirs, "team_b.order")):
            faults[task_id] = await stack.add_fault(
                endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id
            )
            await platform.submit(task_type, order(), task_id=task_id)
        for task_id in (ours, theirs):
            await wait_until(functools.partial(platform.status, task_id), lambda v: v.state == "Error", what="parked")
            await stack.remove_fault(faults[task_id])

        # Another team's task: refused before anything is sent, and left as it was.
        before = (await platform.show(theirs)).operator_actions  # the Supervisor's park
        for act in (
            team_a.retry(theirs, reason="not mine"),
            team_a.compensate(theirs, reason="not mine"),
            team_a.resubmit(theirs, reason="not mine"),
            team_a.skip_step(theirs, "ship", reason="not mine"),
            team_a.show(theirs),
        ):
            with pytest.raises(OutsideTeam, match="team team_b's: this client acts for team team_a only"):
                await act
        assert (await platform.status(theirs)).state == "Error"
        story: TaskStory = await platform.show(theirs)
        assert story.operator_actions == before
        with pytest.raises(OutsideTeam, match="owned by no team"):
            await team_a.submit("order", order())
        with pytest.raises(OutsideTeam, match="team team_b's"):
            await team_a.submit("team_b.order", order())
        with pytest.raises(OutsideTeam, match="--team team_b: this client acts for team team_a only"):
            await team_a.list(team="team_b")
        with pytest.raises(OutsideTeam, match="shipping's breaker is every team's"):
            await team_a.force_breaker("shipping", "open", reason="not mine to open")

        # Its own: listed, selected, acted on, and audited as the team's.
        assert [t.task_id for t in (await team_a.list()).tasks] == [ours]
        selected = await team_a.select(Selection(limit=10, task_states=("Error",)))
        assert [t.task_id for t in selected.tasks] == [ours]
        assert {t.task_id for t in (await platform.select(Selection(limit=10, task_states=("Error",)))).tasks} >= {
            ours,
            theirs,
        }
        await team_a.retry(ours, reason="service is back")
        assert (await platform.result(ours)).state == "Processed"
        audit = (await platform.show(ours)).operator_actions
        assert [(e["action"], e["actor"]) for e in audit][-1] == ("retry", "ada (team team_a)"), audit

        # sas does the same under SAS_OPERATOR__TEAM: one line, exit 1, nothing done.
        refused = await sas(stack, "retry", theirs, "--reason", "not mine", env={"SAS_OPERATOR__TEAM": "team_a"})
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "team team_b's: this client acts for team team_a only" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert (await platform.status(theirs)).state == "Error"
        await stack.client.get_workflow_handle(theirs).terminate("test over")


async def test_a_team_s_operator_cancels_its_team_s_schedules_only(  # type: ignore[no-untyped-def]
    team_types: None,  # noqa: F811
    client: Client,
    temporal_address: str,
    services,
    db_url: str,
) -> None:
    async with start_stack(client, temporal_address, services.url, db_url, supervisor=False) as stack:
        platform = TaskClient(stack.client, stack.settings)
        team_a = TaskClient(stack.client, stack.settings, actor="ada", team="team_a")
        ours, theirs = fresh_id("team-a-daily"), fresh_id("team-b-daily")
        await platform.create_schedule(ours, "team_a.order", order(), every="1d")
        await platform.create_schedule(theirs, "team_b.order", order(), every="1d")
        # A schedule id is what `cancel` takes too: the team check reads the type its runs are of.
        with pytest.raises(OutsideTeam, match="team team_b's: this client acts for team team_a only"):
            await team_a.cancel(theirs, reason="not mine")
        await stack.client.get_schedule_handle(theirs).describe()  # still there
        done = await team_a.cancel(ours, reason="no longer needed")
        assert done.data["cancelled"] == "schedule", done
        with pytest.raises(TaskNotFound):
            await team_a.cancel(ours, reason="twice")  # gone
        with pytest.raises(TaskNotFound):
            await team_a.cancel(fresh_id("no-such-schedule"), reason="gone")
        await stack.client.get_schedule_handle(theirs).delete()
