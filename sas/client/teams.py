"""Which task types a read limited to a team (``--team``, ``TaskClient.alerts(team=...)``) covers:
those that name the team (``TaskDefinition(team=...)``), as the Supervisor routes their alerts to
the team's webhook (``supervisor/alert/webhook.py``)."""

from __future__ import annotations

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
