"""A task's place in a backlogged queue: its priority, kept through every start, and the fairness
key and weight every start gives it.

Temporal hands a backlog out by priority first, then, within a priority, to the fairness keys in
turn, each in proportion to its weight; a task's activities and child workflows inherit its
key. The key comes from the task's type (``TaskDefinition.fairness_key``: its team, or a tenant
field of its input), the weight from the team's setting (``SAS_TEAMS__<TEAM>__WEIGHT``). Both
are worked out again at every start from the type and the input, so a run started again
(rescheduled, resubmitted) carries the same key as its first, and the tasks started before a
team was named, or of a type that names none, carry what they were given (none: one shared
share, in arrival order, as before)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.common import Priority

from sas.settings.teams import TeamSettings, weight_of
from sas.workflows.registry import by_workflow_name

if TYPE_CHECKING:
    from temporalio.api.common.v1 import Priority as PriorityProto
    from temporalio.client import Client


# The memo key of the team a run was started for: what ``sas show`` says of it without loading
# the task types (the fairness key alone does not say it: a tenant's key may hold any text).
TEAM_MEMO = "sas_team"
# The priority a task given none runs at (Temporal's default of its five levels).
DEFAULT_PRIORITY = 3


@dataclass(frozen=True)
class FairShare:
    """Who a task's share belongs to: its type's team, its fairness key and the team's weight
    (None: the server's default, 1)."""

    team: str | None
    fairness_key: str | None
    weight: float | None


def share_of(workflow_type: str, payload: Mapping[str, Any], teams: Mapping[str, TeamSettings]) -> FairShare:
    """The share a task of ``workflow_type`` with ``payload`` is started with; none for a type
    this deployment does not register, or one that names no team and no tenant field."""
    registered = by_workflow_name(workflow_type)
    if registered is None:
        return FairShare(None, None, None)
    definition = registered.definition
    key = definition.fairness_key(payload)
    weight = weight_of(dict(teams), definition.team) if key is not None else None
    return FairShare(definition.team, key, weight)


def fair_priority(
    priority: Priority, workflow_type: str, payload: Mapping[str, Any], teams: Mapping[str, TeamSettings]
) -> Priority:
    """``priority`` (its priority key kept as given) with the task's fairness key and weight; a
    type that gives none keeps the key and weight ``priority`` has (a run started again of a
    task whose type has no team since)."""
    return with_share(priority, share_of(workflow_type, payload, teams))


def with_share(priority: Priority, share: FairShare) -> Priority:
    """``priority`` with ``share``'s fairness key and weight (``fair_priority``)."""
    if share.fairness_key is None:
        return priority
    return Priority(
        priority_key=priority.priority_key,
        fairness_key=share.fairness_key,
        fairness_weight=share.weight,
    )


def deployment_teams() -> Mapping[str, TeamSettings]:
    """The teams' settings of this process (read once, with the rest of its settings), for a
    start that was not given them."""
    from sas.settings import get_settings

    return get_settings().teams


def priority_of(proto: PriorityProto) -> Priority:
    """The priority a run was started with, as Temporal describes it (unset fields: the default)."""
    return Priority(
        priority_key=proto.priority_key or None,
        fairness_key=proto.fairness_key or None,
        fairness_weight=proto.fairness_weight or None,
    )


async def priority_of_run(client: Client, task_id: str, run_id: str | None) -> Priority:
    """The priority the task's last run was started with (the default if Temporal no longer
    keeps that run)."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        described = await client.get_workflow_handle(task_id, run_id=run_id).describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return Priority.default
    return priority_of(described.raw_description.workflow_execution_info.priority)


async def share_of_run(client: Client, task_id: str) -> dict[str, Any] | None:
    """What the task's current run was started with, as Temporal keeps it: its priority (the
    default if none was given), its team (from the memo), fairness key and weight (None: none,
    the server's default weight). None if Temporal no longer keeps the run."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        described = await client.get_workflow_handle(task_id).describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        return None
    given = described.raw_description.workflow_execution_info.priority
    memo = await described.memo()
    team = memo.get(TEAM_MEMO)
    return {
        "priority": given.priority_key or DEFAULT_PRIORITY,
        "team": team if isinstance(team, str) else None,
        "fairness_key": given.fairness_key or None,
        "weight": round(given.fairness_weight, 3) or None,
    }
