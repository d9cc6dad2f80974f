"""Which task types a read limited to a team (``--team``, ``TaskClient.alerts(team=...)``) covers:
those that name the team (``TaskDefinition(team=...)``), as the Supervisor routes their alerts to
the team's webhook (``supervisor/alert/webhook.py``); and the one check of a client that acts for
one team (``TaskClient(team=...)``, ``SAS_OPERATOR__TEAM``): the task it acts on is that team's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from sas.client.errors import InvalidInput, OutsideTeam, TaskNotFound, Unreachable

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.client.store import StateStore


def team_types(team: str) -> list[str]:
    """The task types ``team`` owns in this deployment; InvalidInput when it owns none."""
    from sas.task_models.ids import NAME
    from sas.workflows.registry import task_types, types_of_team

    if not NAME.fullmatch(team):
        raise InvalidInput(f"--team {team!r}: a team is 1-40 characters from a-z 0-9 _", field="team")
    found = types_of_team(team)
    if not found:
        teams = sorted({t.definition.team for t in task_types().values() if t.definition.team})
        raise InvalidInput(
            f"--team {team!r}: no task type of this deployment belongs to it",
            f"teams here: {', '.join(teams)}" if teams else "no task type here names a team (TaskDefinition(team=...))",
            field="team",
        )
    return found


def check_team_of_type(team: str, task_type: str) -> None:
    """OutsideTeam unless ``team`` owns ``task_type``."""
    from sas.workflows.registry import task_types

    found = task_types().get(task_type)
    owner = found.definition.team if found is not None else None
    if owner != team:
        whose = f"team {owner}'s" if owner else "owned by no team"
        raise OutsideTeam(
            f"{task_type} is {whose}: this client acts for team {team} only, and did nothing",
            "ask an operator of that team, or the platform's (SAS_OPERATOR__TEAM unset)",
        )


async def check_team_of_task(
    team: str, store: StateStore, temporal: Callable[[], Awaitable[Client]], task_id: str
) -> None:
    """OutsideTeam unless ``team`` owns the task's type: read from its task row (one read of the
    state store), else from the workflow Temporal runs under its id (a delayed start, a task not
    yet accepted) or that the schedule of that id starts. TaskNotFound when none knows it."""
    from sas.state_store.queries import get_task_row
    from sas.workflows.registry import by_workflow_name

    try:
        row = await store.read(lambda session: get_task_row(session, task_id))
    except Unreachable:
        row = None  # no state store here: Temporal, the truth the mirror follows, says
    task_type = row.task_type if row is not None else None
    if task_type is None:
        workflow_type = await _workflow_type_of(await temporal(), task_id)
        if workflow_type is None:
            raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`")
        found = by_workflow_name(workflow_type)
        task_type = found.definition.task_type if found is not None else workflow_type
    check_team_of_type(team, task_type)


async def _workflow_type_of(client: Client, task_id: str) -> str | None:
    """The workflow type Temporal runs under ``task_id``, or that the schedule of that id starts
    (``cancel`` takes either); None if there is neither."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return (await client.get_workflow_handle(task_id).describe()).workflow_type
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    try:
        action = (await client.get_schedule_handle(task_id).describe()).schedule.action
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return None
    workflow = getattr(action, "workflow", None)
    return workflow if isinstance(workflow, str) else None
