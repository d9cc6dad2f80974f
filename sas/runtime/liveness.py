"""Is each shard's Supervisor workflow running, and when did it last sweep? Asked of Temporal alone.

The last sweep is read from the run's history, not from a query: a query needs a worker to answer
it, and a Supervisor that is not sweeping may be one whose worker is gone. A sweep is a completed
``supervisor.scan`` activity; a run's start counts as one too, since a run continues as new right
after a sweep (and a run just started has had no time to sweep yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from sas.settings import Settings

SCAN_ACTIVITY = "supervisor.scan"  # supervisor/activity_defs.py
# An idle Supervisor writes about a dozen events a sweep: this covers many sweeps and stays cheap.
_HISTORY_PAGE = 200
_HISTORY_PAGES = 5
_RPC_TIMEOUT = timedelta(seconds=10)


@dataclass(frozen=True)
class ShardLiveness:
    workflow_id: str
    status: str  # RUNNING, TERMINATED, ... or NOT_FOUND
    last_sweep: datetime | None = None

    def problem(self, now: datetime, bound_s: float) -> str | None:
        """What is wrong with this shard's Supervisor, or None."""
        if self.status != "RUNNING":
            return f"Supervisor workflow {self.workflow_id!r} is not running ({self.status})"
        if self.last_sweep is None:
            return f"Supervisor workflow {self.workflow_id!r} has no sweep in its recent history"
        age = (now - self.last_sweep).total_seconds()
        if age > bound_s:
            return f"Supervisor workflow {self.workflow_id!r} has not swept for {age:.0f}s (bound {bound_s:g}s)"
        return None


def sweep_bound_s(settings: Settings) -> float:
    """How long a shard may go without a sweep: idle sweeps are ``max_interval_s`` apart, plus
    the sweep's own time and a slow round trip, unless ``sweep_bound_s`` sets it."""
    sup = settings.supervisor
    return sup.sweep_bound_s if sup.sweep_bound_s is not None else sup.max_interval_s + 90.0


async def workflow_status(client: Client, workflow_id: str) -> str:
    """The latest run's status (``RUNNING``, ``TERMINATED``...), ``NOT_FOUND`` if there is none."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe(rpc_timeout=_RPC_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return "NOT_FOUND"
        raise
    if described.status is None:
        return "UNKNOWN"
    return described.status.name


async def shard_liveness(client: Client, settings: Settings) -> list[ShardLiveness]:
    """Every shard's Supervisor: its status and, if running, its last sweep."""
    found = []
    for shard in range(settings.supervisor.shards):
        workflow_id = settings.supervisor.shard_workflow_id(shard)
        status = await workflow_status(client, workflow_id)
        last = await last_sweep(client, settings.temporal.namespace, workflow_id) if status == "RUNNING" else None
        found.append(ShardLiveness(workflow_id, status, last))
    return found


async def last_sweep(client: Client, namespace: str, workflow_id: str) -> datetime | None:
    """When the latest run of ``workflow_id`` last completed a scan (or started), from its history."""
    completed: dict[int, datetime] = {}
    token = b""
    for _ in range(_HISTORY_PAGES):
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=namespace,
                execution=WorkflowExecution(workflow_id=workflow_id),
                maximum_page_size=_HISTORY_PAGE,
                next_page_token=token,
            ),
            timeout=_RPC_TIMEOUT,
        )
        for event in page.history.events:
            at = event.event_time.ToDatetime(tzinfo=UTC)
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                completed[event.activity_task_completed_event_attributes.scheduled_event_id] = at
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                if name == SCAN_ACTIVITY and event.event_id in completed:
                    return completed[event.event_id]
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                return at
        token = page.next_page_token
        if not token:
            break
    return None
