"""``supervisor.check_queues``: task queues with work waiting and nobody polling them, or a
backlog that keeps growing, from Temporal's own view of each queue. Queues nobody polls are
one incident however many there are (every worker down is one outage, not one alert
per queue): one ``queue_unpolled`` alert naming each such queue, kept up to date as they come
and go, resolved when every one has its pollers back or no work waiting. A growing backlog is
an alert per queue. The same check also looks for workflows Temporal reports stuck
(``supervisor/detect/reported_problems.py``).

Each workflow queue has one activity queue per remote service beside it (``task_models/queues.py``),
checked for activity pollers alone. A service whose circuit breaker holds its work has no
pollers on purpose (its workers wait at the breaker's gate): that is not an incident."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from sas.activities.services import AGENTS
from sas.breaker.held import holding
from sas.settings import Settings
from sas.state_store.alerts import active_alerts_of_kind
from sas.state_store.queries import waiting_tasks_by_queue
from sas.supervisor.activity_defs import QueueDefs
from sas.supervisor.activity_support import beat
from sas.supervisor.alert import raise_once, resolve_key
from sas.supervisor.detect.reported_problems import check_reported_problems
from sas.supervisor.metrics import record_backlog, record_breakers, record_service_queue
from sas.supervisor.models import AlertSpec, QueueCheckInput, QueueCheckResult
from sas.task_models.ids import service_settings
from sas.task_models.queues import service_queue

# The one incident of queues nobody polls (one per Supervisor's state store: every queue it sees).
UNPOLLED_KEY = "queue_unpolled"
_KIND_NAMES = {TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW: "workflow", TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY: "activity"}


class QueueActivities(QueueDefs):
    def __init__(self, sessions: async_sessionmaker[AsyncSession], client: Client, settings: Settings) -> None:
        self._sessions = sessions
        self._client = client
        self._settings = settings

    @activity.defn(name="supervisor.check_queues")
    async def check_queues(self, request: QueueCheckInput) -> QueueCheckResult:
        """Queues with work waiting and nobody polling: one incident naming them all, resolved
        when every one has pollers back; a growing backlog: an alert per queue, resolved when
        it stops growing."""
        s = self._settings.supervisor
        now = datetime.now(UTC)
        async with self._sessions() as session:
            waiting = await waiting_tasks_by_queue(session, now - timedelta(seconds=s.queue_idle_after_s))
        queues = dict.fromkeys([self._settings.temporal.task_queue, *waiting])
        held = await holding(self._sessions, now)
        record_breakers(sorted(AGENTS), held)
        result = QueueCheckResult(queues=len(queues), held=sorted(held))
        unpolled: list[Unpolled] = []
        services_unpolled: list[Unpolled] = []
        for queue in queues:
            for service in AGENTS:
                found = await self._check_service_queue(queue, service, service in held, request, result, now)
                if found is not None:
                    services_unpolled.append(found)
        for queue in queues:
            beat()
            by_kind, backlog = await self._describe_queue(queue)
            pollers = sum(by_kind.values())
            record_backlog(queue, backlog, pollers)
            result.backlog[queue] = backlog
            n = max(waiting.get(queue, 0), backlog)
            previous = request.backlog.get(queue)
            growing = previous is not None and backlog > previous and backlog >= s.batch_size
            missing = [kind for kind, count in by_kind.items() if count == 0]
            if missing and n > 0:
                result.unpolled.append(queue)
                who = "no worker (workflows nor Agents)" if len(missing) == 2 else f"no {missing[0]} worker"
                unpolled.append(
                    Unpolled(
                        queue,
                        f"{who} is polling queue {queue}; {n} steps waiting (backlog {backlog})",
                        f"`sas worker` with SAS_TEMPORAL__TASK_QUEUE={queue}",
                        n,
                    )
                )
            elif growing:
                spec = AlertSpec(
                    severity="warning",
                    kind="queue_backlog",
                    message=f"queue {queue}: backlog growing ({previous} -> {backlog}) with {pollers} pollers",
                    suggested_action=f"add task workers on {queue} or find out why they are slow",
                )
                backlog_key = f"queue_backlog:{queue}"
                result.opened += int(await raise_once(self._sessions, spec, backlog_key, now, failure_count=n))
            if not growing:
                result.resolved += await resolve_key(
                    self._sessions, f"queue_backlog:{queue}", now, "backlog no longer growing"
                )
        opened, resolved = await _one_incident(self._sessions, unpolled + services_unpolled, now)
        result.opened += opened
        result.resolved += resolved
        result.stuck = await check_reported_problems(self._sessions, self._client, queues, now)
        return result

    async def _check_service_queue(
        self,
        queue: str,
        service: str,
        held: bool,
        request: QueueCheckInput,
        result: QueueCheckResult,
        now: datetime,
    ) -> Unpolled | None:
        """One service's activity queue: its backlog and pollers exported; unpolled when work
        waits there with no activity worker polling, unless the service's breaker holds it."""
        beat()
        name = service_queue(queue, service)
        by_kind, backlog = await self._describe_queue(name, kinds=(TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,))
        pollers = by_kind["activity"]
        record_backlog(name, backlog, pollers)
        record_service_queue(service, name, backlog, pollers)
        result.backlog[name] = backlog
        found = None
        if pollers == 0 and backlog > 0 and not held:
            result.unpolled.append(name)
            found = Unpolled(
                name,
                f"no activity worker is polling queue {name}; {backlog} {service} calls waiting",
                f"`sas worker` (SAS_TEMPORAL__TASK_QUEUE={queue}, SAS_WORKER__QUEUES with {service}): it polls {name}",
                backlog,
            )
        previous = request.backlog.get(name)
        growing = previous is not None and backlog > previous and backlog >= self._settings.supervisor.batch_size
        backlog_key = f"queue_backlog:{name}"
        if growing and not held:
            spec = AlertSpec(
                severity="warning",
                kind="queue_backlog",
                message=f"queue {name}: backlog growing ({previous} -> {backlog}) with {pollers} pollers",
                suggested_action=f"add workers for {service} (docs/operator.md, scaling per service), or raise"
                f" {service_settings(service)}__MAX_PER_SECOND if its rate limit holds it",
            )
            result.opened += int(await raise_once(self._sessions, spec, backlog_key, now, failure_count=backlog))
        else:
            result.resolved += await resolve_key(self._sessions, backlog_key, now, "backlog no longer growing")
        return found

    async def _describe_queue(
        self,
        queue: str,
        kinds: tuple[TaskQueueType.ValueType, ...] = (
            TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
        ),
    ) -> tuple[dict[str, int], int]:
        """Live pollers of the workflow and of the activity task queue, counted apart (a worker
        whose Agents are starved still polls workflows), and their approximate backlog."""
        pollers = {"workflow": 0, "activity": 0}
        backlog = 0
        fresh_after = datetime.now(UTC) - timedelta(seconds=self._settings.supervisor.poller_stale_s)
        for kind in kinds:
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


@dataclass(frozen=True)
class Unpolled:
    """A queue with work waiting and no worker polling it: what the incident says of it."""

    queue: str
    said: str
    start: str
    waiting: int


async def _one_incident(
    sessions: async_sessionmaker[AsyncSession], unpolled: list[Unpolled], now: datetime
) -> tuple[int, int]:
    """The one ``queue_unpolled`` incident: raised (or brought up to date) naming every queue
    nobody polls, resolved once there is none. (opened, resolved)."""
    opened = resolved = 0
    if unpolled:
        spec = AlertSpec(
            severity="critical",
            kind="queue_unpolled",
            message=(
                f"{len(unpolled)} task queue(s) with work waiting and no worker: "
                + "; ".join(u.said for u in unpolled)
                + ". Their complete-by is not counted while they wait"
            ),
            suggested_action="start the task workers: " + "; ".join(dict.fromkeys(u.start for u in unpolled)),
        )
        waiting = sum(u.waiting for u in unpolled)
        opened += int(await raise_once(sessions, spec, UNPOLLED_KEY, now, failure_count=waiting))
    else:
        resolved += await resolve_key(sessions, UNPOLLED_KEY, now, "every queue has its pollers back (or no work)")
    # Alerts of one queue each, from before there was one incident for all: it stands for them.
    async with sessions() as session:
        legacy = [
            a.incident_key
            for a in await active_alerts_of_kind(session, "queue_unpolled")
            if a.incident_key != UNPOLLED_KEY
        ]
    for key in legacy:
        resolved += await resolve_key(sessions, key, now, "now one incident for every unpolled queue")
    return opened, resolved
