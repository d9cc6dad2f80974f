"""``supervisor.check_queues``: task queues with work waiting and nobody polling them, or a
backlog that keeps growing, from Temporal's own view of each queue; one alert per queue
incident, resolved when pollers return and the backlog stops growing. The same check also
looks for workflows Temporal reports stuck (``supervisor/reported_problems.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from sas.settings import Settings
from sas.state_store.alerts import active_alerts_of_kind
from sas.state_store.queries import waiting_tasks_by_queue
from sas.supervisor.activity_defs import QueueDefs
from sas.supervisor.activity_support import beat
from sas.supervisor.alert_rows import raise_once, resolve_key
from sas.supervisor.metrics import record_backlog
from sas.supervisor.models import AlertSpec, QueueCheckInput, QueueCheckResult
from sas.supervisor.reported_problems import check_reported_problems

_KIND_NAMES = {TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW: "workflow", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY: "activity"}


class QueueActivities(QueueDefs):
    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, settings: Settings) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings

    @activity.defn(name="supervisor.check_queues")
    async def check_queues(self, request: QueueCheckInput) -> QueueCheckResult:
        """Queues with work waiting and nobody polling (or a growing backlog): one alert per
        queue incident, resolved when pollers return and the backlog stops growing."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        async with self._sessions() as session:
            waiting = await waiting_tasks_by_queue(session, now - timedelta(seconds=s.queue_idle_after_s))
        queues = dict.fromkeys([self._settings.temporal.task_queue, *waiting])
        result = QueueCheckResult(queues=len(queues))
        for queue in queues:
            beat()
            by_kind, backlog = await self._describe_queue(queue)
            pollers = sum(by_kind.values())
            record_backlog(queue, backlog, pollers)
            result.backlog[queue] = backlog
            n = max(waiting.get(queue, 0), backlog)
            previous = request.backlog.get(queue)
            growing = previous is not None and backlog > previous and backlog >= s.batch_size
            key = f"queue_unpolled:{queue}"
            missing = [kind for kind, count in by_kind.items() if count == 0]
            if missing and n > 0:
                result.unpolled.append(queue)
                who = "no worker (workflows nor Agents)" if len(missing) == 2 else f"no {missing[0]} worker"
                spec = AlertSpec(
                    severity="critical",
                    kind="queue_unpolled",
                    message=(
                        f"{who} is polling queue {queue}; {n} steps waiting (backlog {backlog}); "
                        "their complete-by is not counted while they wait"
                    ),
                    suggested_action=f"start a task worker on {queue} (`sas worker` with SAS_TEMPORAL__TASK_QUEUE={queue})",
                )
                result.opened += int(await raise_once(self._sessions, spec, key, now, failure_count=n))
            elif growing:
                spec = AlertSpec(
                    severity="warning",
                    kind="queue_backlog",
                    message=f"queue {queue}: backlog growing ({previous} -> {backlog}) with {pollers} pollers",
                    suggested_action=f"add task workers on {queue} or find out why they are slow",
                )
                backlog_key = f"queue_backlog:{queue}"
                result.opened += int(await raise_once(self._sessions, spec, backlog_key, now, failure_count=n))
            if not missing:
                result.resolved += await resolve_key(self._sessions, key, now, f"{pollers} pollers are back on {queue}")
            if not growing:
                result.resolved += await resolve_key(
                    self._sessions, f"queue_backlog:{queue}", now, "backlog no longer growing"
                )
        result.stuck = await check_reported_problems(self._sessions, self._client, queues, now)
        # Incidents on queues that no longer have work waiting end too.
        async with self._sessions() as session:
            stale = [
                a
                for a in await active_alerts_of_kind(session, "queue_unpolled")
                if a.incident_key.split(":", 1)[1] not in queues
            ]
        for alert in stale:
            result.resolved += await resolve_key(self._sessions, alert.incident_key, now, "no steps waiting any more")
        return result

    async def _describe_queue(self, queue: str) -> tuple[dict[str, int], int]:
        """Live pollers of the workflow and of the activity task queue, counted apart (a worker
        whose Agents are starved still polls workflows), and their approximate backlog."""
        pollers = {"workflow": 0, "activity": 0}
        backlog = 0
        fresh_after = datetime.now(UTC) - timedelta(seconds=self._settings.supervisor.poller_stale_s)
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            response = await self._client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self._client.namespace,
                    task_queue=TaskQueue(name=queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                    task_queue_type=kind,
                    report_stats=True,
                )
            )
            for poller in response.pollers:
                seen = poller.last_access_time.ToDatetime(tzinfo=UTC) if poller.HasField("last_access_time") else None
                pollers[_KIND_NAMES[kind]] += seen is None or seen >= fresh_after
            if response.HasField("stats"):
                backlog += response.stats.approximate_backlog_count
            elif response.HasField("task_queue_status"):
                backlog += response.task_queue_status.backlog_count_hint
        return pollers, backlog
