"""``sas health worker|supervisor``: is the worker (or Supervisor) on *this host* polling?

A container healthcheck that only opens Temporal's port says nothing about the process it
runs next to. This asks Temporal which pollers it has seen on the role's task queue and
passes only if one of them is a process of this host (the identity sas gives its workers
is ``<role>-<pid>@<hostname>``, see ``sas/runtime/connect.py``) and polled recently: the
process is up, connected and still taking tasks. It needs Temporal: with Temporal down
the worker is not doing work either, and the check says so.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from sas.cli.output import CliError, console, shown

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.settings import Settings

# Temporal answers an idle long poll after about a minute and the SDK polls again at once,
# so a live poller is never seen longer ago than that; 90 s leaves room for a slow round trip.
DEFAULT_MAX_AGE_S = 90.0
CONNECT_TIMEOUT_S = 10.0


class Role(StrEnum):
    worker = "worker"
    supervisor = "supervisor"


@dataclass(frozen=True)
class Poller:
    identity: str
    queue_type: str
    age_s: float


def register(app: typer.Typer) -> None:
    app.command("health")(health)


def health(
    role: Role = typer.Argument(..., help="Which process of this host to check."),
    max_age_s: float = typer.Option(DEFAULT_MAX_AGE_S, help="Unhealthy if its last poll is older than this."),
    max_sweep_age_s: float | None = typer.Option(
        None,
        min=0.001,
        help="supervisor: unhealthy if a shard has not swept for this long (default: SAS_SUPERVISOR__SWEEP_BOUND_S).",
    ),
) -> None:
    """Exit 0 if the worker or Supervisor on this host polls its task queue (for healthchecks); for
    the Supervisor, also only if every shard's Supervisor workflow runs and has swept within its bound."""
    from sas.runtime.entry import describe_settings_error, settings_errors
    from sas.settings import get_settings

    try:
        settings = get_settings()
    except settings_errors() as err:
        # describe_settings_error names the variables, never their values.
        raise CliError(f"invalid settings:\n{describe_settings_error(err)}", code=2) from None
    queue = settings.temporal.task_queue if role is Role.worker else settings.temporal.supervisor_task_queue
    import asyncio

    pollers = asyncio.run(_pollers(settings, queue))
    mine = [p for p in pollers if is_this_host(p.identity, role, settings.temporal.identity)]
    # Both kinds: a worker whose activity poller died still looks alive to its workflows.
    stale = [
        kind
        for kind in ("workflow", "activity")
        if not any(p.queue_type == kind and p.age_s <= max_age_s for p in mine)
    ]
    if stale:
        others = sorted({p.identity for p in pollers} - {p.identity for p in mine})
        raise CliError(
            f"unhealthy: no {role} of host {socket.gethostname()} has polled the {' and '.join(stale)} "
            f"task queue {queue!r} in the last {max_age_s:g}s",
            f"other pollers of {queue!r}: {', '.join(others) or 'none'}",
        )
    if role is Role.supervisor:
        _check_supervisor_workflows(settings, max_sweep_age_s)
    freshest = min(mine, key=lambda p: p.age_s)
    # A poller's identity is whatever that client called itself: outside text.
    console.print(
        f"healthy: {shown(freshest.identity)} polls {shown(repr(queue))} (last poll {freshest.age_s:.0f}s ago)"
    )


def _check_supervisor_workflows(settings: Settings, max_sweep_age_s: float | None) -> None:
    """A Supervisor worker polling an empty queue is no Supervisor: the workflows must run and sweep."""
    import asyncio

    from sas.supervisor.liveness import sweep_bound_s

    bound = max_sweep_age_s if max_sweep_age_s is not None else sweep_bound_s(settings)
    problems = asyncio.run(_supervisor_problems(settings, bound))
    if problems:
        more = f" (and {len(problems) - 1} more shard(s))" if len(problems) > 1 else ""
        raise CliError(
            f"unhealthy: {problems[0]}{more}",
            "a Supervisor worker starts a closed one again within SAS_SUPERVISOR__KEEP_RUNNING_S;"
            " `sas health` passes again once it has swept",
        )


async def _supervisor_problems(settings: Settings, bound_s: float) -> list[str]:
    from temporalio.service import RPCError

    from sas.supervisor.liveness import shard_liveness

    client = await _connect(settings)
    try:
        shards = await shard_liveness(client, settings)
    except RPCError as err:
        raise CliError(f"unhealthy: Temporal did not describe the Supervisor workflows: {err.message}") from None
    now = datetime.now(UTC)
    return [p for p in (s.problem(now, bound_s) for s in shards) if p is not None]


def is_this_host(identity: str, role: Role, configured: str | None) -> bool:
    """Whether a poller identity is this host's ``role`` process; an identity set in
    SAS_TEMPORAL__IDENTITY must match exactly."""
    if configured:
        return identity == configured
    return re.fullmatch(rf"{role.value}-\d+@{re.escape(socket.gethostname())}", identity) is not None


async def _pollers(settings: Settings, queue: str) -> list[Poller]:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    client = await _connect(settings)
    now = datetime.now(UTC)
    found: list[Poller] = []
    for kind, queue_type in (
        ("workflow", TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
        ("activity", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),
    ):
        try:
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=settings.temporal.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=queue_type,
                ),
                timeout=timedelta(seconds=CONNECT_TIMEOUT_S),
            )
        except RPCError as err:
            raise CliError(f"unhealthy: Temporal did not describe task queue {queue!r}: {err.message}") from None
        for poller in described.pollers:
            seen = poller.last_access_time.ToDatetime(tzinfo=UTC)
            found.append(Poller(poller.identity, kind, max(0.0, (now - seen).total_seconds())))
    return found


async def _connect(settings: Settings) -> Client:
    import asyncio

    from sas.runtime.connect import connect
    from sas.runtime.failures import TemporalUnreachable

    try:
        return await asyncio.wait_for(connect(settings.temporal, "health"), CONNECT_TIMEOUT_S)
    except (TimeoutError, RuntimeError, TemporalUnreachable) as err:
        raise CliError(
            f"unhealthy: cannot reach Temporal at {settings.temporal.address} ({err.__class__.__name__})"
        ) from None
