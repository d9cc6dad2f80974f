"""Which team a read is limited to (``--team``, ``TaskClient.alerts(team=...)``), and which team
owns an alert: the team its task types name (``TaskDefinition(team=...)``), as the Supervisor
routes alerts to the team's webhook (``supervisor/alert/webhook.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from sas.client.errors import InvalidInput


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


def owner_of(task_types: Iterable[str]) -> str | None:
    """The team that owns what is about these task types; None: the platform's."""
    from sas.workflows.registry import TaskTypeError, owning_team

    names = set(task_types)
    try:
        return owning_team(names) if names else None
    except TaskTypeError:
        return None
