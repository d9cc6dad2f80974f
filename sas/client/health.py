"""``TaskClient.health``: is the worker (or Supervisor) on *this host* polling?

A container healthcheck that only opens Temporal's port says nothing about the process it
runs next to. This asks Temporal which pollers it has seen on the role's task queue and
passes only if one of them is a process of this host (the identity sas gives its workers
is ``<role>-<pid>@<hostname>``, see ``sas/runtime/connect.py``) and polled recently: the
process is up, connected and still taking tasks. For the Supervisor, every shard's workflow
must also run and have swept within its bound (``sas.runtime.liveness``). It needs Temporal:
with Temporal down the worker is not doing work either, and the check says so.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

from sas.client.errors import InvalidInput, Unhealthy

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.settings import Settings

Role = Literal["worker", "supervisor"]
# Temporal answers an idle long poll after about a minute and the SDK polls again at once,
# so a live poller is never seen longer ago than that; 90 s leaves room for a slow round trip.
DEFAULT_MAX_AGE_S = 90.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Poller:
    """A poller Temporal has seen on a task queue: who (its identity, outside text), of which
    kind (``workflow`` or ``activity``) and how long ago it last polled."""

    identity: str
    queue_type: str
    age_s: float


@dataclass(frozen=True)
class Health:
    """A healthy process: its ``role``, the ``queue`` it polls and its freshest ``poller``."""

    role: Role
    queue: str
    poller: Poller


def is_this_host(identity: str, role: str, configured: str | None) -> bool:
    """Whether a poller identity is this host's ``role`` process; an identity set in
    SAS_TEMPORAL__IDENTITY must match exactly."""
    if configured:
        return identity == configured
    return re.fullmatch(rf"{role}-\d+@{re.escape(socket.gethostname())}", identity) is not None


async def check(
    client: Client | None, settings: Settings, role: Role, max_age_s: float, max_sweep_age_s: float | None
) -> Health:
    """This host's ``role`` process as Temporal sees it, or ``Unhealthy`` saying what is wrong."""
    if role not in ("worker", "supervisor"):
        raise InvalidInput(f"unknown role {role!r}: worker or supervisor", field="role")
    client = client or await _connect(settings)
    queue = settings.temporal.task_queue if role == "worker" else settings.temporal.supervisor_task_queue
    pollers = await _pollers(client, settings.temporal.namespace, queue)
    mine = [p for p in pollers if is_this_host(p.identity, role, settings.temporal.identity)]
    # Both kinds: a worker whose activity poller died still looks alive to its workflows.
    stale = [
        kind
        for kind in ("workflow", "activity")
        if not any(p.queue_type == kind and p.age_s <= max_age_s for p in mine)
    ]
    if stale:
        others = sorted({p.identity for p in pollers} - {p.identity for p in mine})
        raise Unhealthy(
            f"unhealthy: no {role} of host {socket.gethostname()} has polled the {' and '.join(stale)} "
            f"task queue {queue!r} in the last {max_age_s:g}s",
            f"other pollers of {queue!r}: {', '.join(others) or 'none'}",
        )
    if role == "supervisor":
        await _check_supervisor_workflows(client, settings, max_sweep_age_s)
    return Health(role, queue, min(mine, key=lambda p: p.age_s))


async def _check_supervisor_workflows(client: Client, settings: Settings, max_sweep_age_s: float | None) -> None:
    """A Supervisor worker polling an empty queue is no Supervisor: the workflows must run and sweep."""
    from temporalio.service import RPCError

    from sas.runtime.liveness import shard_liveness, sweep_bound_s

    bound = max_sweep_age_s if max_sweep_age_s is not None else sweep_bound_s(settings)
    try:
        shards = await shard_liveness(client, settings)
    except RPCError as err:
        raise Unhealthy(f"unhealthy: Temporal did not describe the Supervisor workflows: {err.message}") from None
    now = datetime.now(UTC)
    problems = [p for p in (s.problem(now, bound) for s in shards) if p is not None]
    if problems:
        more = f" (and {len(problems) - 1} more shard(s))" if len(problems) > 1 else ""
        raise Unhealthy(
            f"unhealthy: {problems[0]}{more}",
            "a Supervisor worker starts a closed one again within SAS_SUPERVISOR__KEEP_RUNNING_S;"
            " `sas health` passes again once it has swept",
        )


async def _pollers(client: Client, namespace: str, queue: str) -> list[Poller]:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    now = datetime.now(UTC)
    found: list[Poller] = []
    for kind, queue_type in (
        ("workflow", TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW),
        ("activity", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY),
    ):
        try:
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=namespace, task_queue=TaskQueue(name=queue), task_queue_type=queue_type
                ),
                timeout=timedelta(seconds=CONNECT_TIMEOUT_S),
            )
        except RPCError as err:
            raise Unhealthy(f"unhealthy: Temporal did not describe task queue {queue!r}: {err.message}") from None
        for poller in described.pollers:
            seen = poller.last_access_time.ToDatetime(tzinfo=UTC)
            found.append(Poller(poller.identity, kind, max(0.0, (now - seen).total_seconds())))
    return found


async def _connect(settings: Settings) -> Client:
    """A client of its own, as ``health``, within a bound: a healthcheck must answer in time."""
    import asyncio

    from sas.runtime.connect import connect
    from sas.runtime.failures import TemporalUnreachable

    try:
        return await asyncio.wait_for(connect(settings.temporal, "health"), CONNECT_TIMEOUT_S)
    except (TimeoutError, RuntimeError, TemporalUnreachable) as err:
        raise Unhealthy(
            f"unhealthy: cannot reach Temporal at {settings.temporal.address} ({err.__class__.__name__})"
        ) from None
