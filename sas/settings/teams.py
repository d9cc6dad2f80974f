"""Each team's share of a backlogged queue (``SAS_TEAMS__<TEAM>__WEIGHT``) and where its alerts go
(``SAS_TEAMS__<TEAM>__WEBHOOK__URL``), for the team a task type names (``TaskDefinition(team=...)``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sas.settings.services import ServiceSettings
from sas.settings.supervisor import TaskLadder, WebhookSettings
from sas.task_models.ids import NAME, scoped_name
from sas.task_models.plans import StepPolicyValues

# Temporal clamps a fairness weight to this range; a value outside it is refused here rather than
# silently changed by the server.
MIN_WEIGHT, MAX_WEIGHT = 0.001, 1000.0


class TeamSettings(BaseModel):
    """One team's settings (``SAS_TEAMS__PAYMENTS__WEIGHT=3``)."""

    model_config = ConfigDict(extra="forbid")

    weight: float = Field(
        default=1.0,
        ge=MIN_WEIGHT,
        le=MAX_WEIGHT,
        description="The team's fairness weight, 0.001 to 1000: with two teams' tasks waiting in one queue, a team of"
        " weight 3 is handed three for each one of a team of weight 1. Carried by each task when it is started:"
        " a change applies to the tasks started after it.",
    )
    services: dict[str, ServiceSettings] = Field(
        default_factory=dict,
        description="The settings of each of the team's own services (Service(name, team=...)), as"
        " SAS_SERVICES__<NAME>__* gives a platform's: SAS_TEAMS__NORTH__SERVICES__FLIGHTS__URL. The plain"
        " SAS_SERVICES__* fields are their defaults too.",
    )
    steps: dict[str, dict[str, StepPolicyValues]] = Field(
        default_factory=dict,
        description="The policy of a step of one of the team's task types, as SAS_STEPS__<TYPE>__<STEP>__* gives"
        " it for a type without a team: SAS_TEAMS__NORTH__STEPS__BOOKING__FLIGHT__COMPLETE_BY_S=20.",
    )
    ladders: dict[str, TaskLadder] = Field(
        default_factory=dict,
        description="The Supervisor's ladder of one of the team's task types (and its steps), as"
        " SAS_SUPERVISOR__LADDERS__<TYPE>__* gives it for a type without a team:"
        " SAS_TEAMS__NORTH__LADDERS__BOOKING__COOLDOWN_S=30.",
    )
    webhook: WebhookSettings = Field(
        default_factory=WebhookSettings,
        description="Where the team's alerts and incidents go (those of its task types' tasks), instead of"
        " SAS_SUPERVISOR__WEBHOOK: no other team's reach it. Unset: the team's go to SAS_SUPERVISOR__WEBHOOK.",
    )


def check_team_names(value: Any) -> Any:
    """The teams' map keyed as task types name them: lower case (the environment's upper-case
    ``PAYMENTS`` is ``payments``), each a name as ``TaskDefinition(team=...)`` allows."""
    if not isinstance(value, dict):
        return value
    teams = {str(name).lower(): entry for name, entry in value.items()}
    bad = sorted(name for name in teams if not NAME.fullmatch(name))
    if bad:
        raise ValueError(f"team {bad[0]!r}: use 1-40 characters from a-z 0-9 _, starting with a letter")
    return teams


@dataclass(frozen=True)
class TeamOverrides:
    """The teams' own settings under their scoped names (``north.flights``, ``north.booking``),
    where every reader finds a platform's: services, step policies (``<type>.<step>``), ladders."""

    services: dict[str, ServiceSettings]
    steps: dict[str, StepPolicyValues]
    ladders: dict[str, TaskLadder]


def team_overrides(teams: dict[str, TeamSettings]) -> TeamOverrides:
    """Each team's own settings under their scoped names, each name as its declaration allows."""
    found = TeamOverrides({}, {}, {})
    for team, entry in teams.items():
        where = f"SAS_TEAMS__{team.upper()}"
        for group, names in (("SERVICES", entry.services), ("STEPS", entry.steps), ("LADDERS", entry.ladders)):
            bad = [name for name in names if not NAME.fullmatch(name)]
            if bad:
                raise ValueError(f"{where}__{group}__{bad[0].upper()}: use 1-40 characters from a-z 0-9 _")
        found.services.update({scoped_name(team, name): own for name, own in entry.services.items()})
        found.ladders.update({scoped_name(team, name): own for name, own in entry.ladders.items()})
        for task_type, steps in entry.steps.items():
            found.steps.update({f"{scoped_name(team, task_type)}.{step}": policy for step, policy in steps.items()})
    return found


def weight_of(teams: dict[str, TeamSettings], team: str | None) -> float | None:
    """The weight a task of ``team`` carries; None (the server's default, 1) for a team not set."""
    if team is None or team not in teams:
        return None
    return teams[team].weight
