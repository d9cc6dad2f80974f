"""``TaskClient``'s reads of the state store - a task's story, the task list, alerts, the
services' breakers, incidents - and the few changes that go with them (an alert or incident
acknowledged or resolved, a breaker forced). None needs Temporal but ``show`` of a task the
state store does not know: a lazy client answers them while Temporal is away."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from sas.client import incidents, inputs
from sas.client.core import ClientCore, typed
from sas.client.errors import InvalidInput, OutsideTeam

# Only what a read of the state store needs is imported here: `sas show`, `list` and `alerts`
# load nothing of Temporal's SDK or the task types (they start fast).
if TYPE_CHECKING:
    from sas.client.alerts import AlertChange, AlertList
    from sas.client.breakers import BreakerChange, ServiceView
    from sas.client.incidents import IncidentView
    from sas.client.listing import TaskList
    from sas.client.story import TaskStory


class ReadCalls(ClientCore):
    """The reads of ``TaskClient`` (its part for ``sas show``, ``list``, ``alerts``,
    ``services`` and ``incidents``)."""

    @typed
    async def incidents(
        self, status: str = "active", limit: int = 100, *, team: str | None = None
    ) -> list[IncidentView]:
        """Incidents, newest first: ``active`` (open or acked), ``open``, ``acked``, ``resolved`` or
        ``all``; ``team``: only those with a task of that team's types."""
        team = self._read_team(team)
        return await incidents.list_incidents(self.store, status, limit, await self._releases(), team)

    @typed
    async def incident(self, incident_id: int, limit: int = 100) -> IncidentView:
        """One incident and the ids of its tasks (the first ``limit``)."""
        return await incidents.get_incident(self.store, incident_id, limit, await self._releases())

    @typed
    async def resolve_incident(self, incident_id: int) -> tuple[str, str]:
        """Close an incident (its alert); its status before and after."""
        return await incidents.set_incident(self.store, incident_id, "resolve")

    @typed
    async def acknowledge_incident(self, incident_id: int) -> tuple[str, str]:
        """Say someone is on an incident (its alert); its status before and after."""
        return await incidents.set_incident(self.store, incident_id, "ack")

    @typed
    async def show(self, task_id: str) -> TaskStory:
        """The task's story (``TaskStory``): its steps, every attempt, decision and operator
        action in time order, its alerts; a delayed, cancelled or unaccepted one from what
        Temporal and the audit log know. ``TaskNotFound`` if nothing knows it."""
        from sas.client.story import tell

        inputs.check_task_id(task_id)
        await self._in_team(task_id)
        return await tell(self.store, self._temporal, task_id)

    @typed
    async def alerts(
        self, status: str = "open", limit: int = 100, *, folded: bool = False, team: str | None = None
    ) -> AlertList:
        """Alerts, newest first: ``open``, ``acked``, ``resolved`` or ``all``. A task's alert
        folded into an open incident is only counted (``AlertList.folded``) unless ``folded``.
        ``team``: only the alerts that team owns (of its task types' tasks, or incidents of them)."""
        from sas.client.alerts import list_alerts

        return await list_alerts(self.store, status, limit, folded=folded, team=self._read_team(team))

    @typed
    async def acknowledge_alert(self, alert_id: int) -> AlertChange:
        """Say someone is on an open alert (a resolved one stays resolved: ``changed`` False)."""
        from sas.client.alerts import set_alert

        return await set_alert(self.store, alert_id, "ack")

    @typed
    async def resolve_alert(self, alert_id: int) -> AlertChange:
        """Close an open or acknowledged alert."""
        from sas.client.alerts import set_alert

        return await set_alert(self.store, alert_id, "resolve")

    @typed
    async def services(self) -> list[ServiceView]:
        """Each remote service's circuit breaker and queue, by name (``ServiceView``). A release
        under way counts the calls still held in the service's queue, as Temporal has it."""
        from sas.client.breakers import services

        return await services(self.store, self.settings, self._activities_waiting)

    async def _releases(self) -> dict[str, str]:
        """The staged release under way on each service that has one, in the words of ``services``
        (so an incident says "40 of about 400" as its service does). Only while a release is under
        way are the services listed and Temporal asked: otherwise a read of incidents stays a
        read of the state store, importing neither Temporal's SDK nor the task types."""
        from sas.breaker.rows import read_breakers

        rows = await self.store.read(read_breakers)
        if all(view.release_since is None for view in rows.values()):
            return {}
        return {s.service: s.release for s in await self.services() if s.release is not None}

    async def _activities_waiting(self, queue: str) -> int | None:
        """Temporal's approximate backlog of activities on ``queue``; None when Temporal cannot
        be asked now (the breakers' rows still say the rest)."""
        from datetime import timedelta

        from temporalio.api.enums.v1 import TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
        from temporalio.service import RPCError

        from sas.client.errors import Unreachable

        try:
            client = await self._temporal()
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                    report_stats=True,
                ),
                timeout=timedelta(seconds=5),
            )
        except (RPCError, Unreachable):
            return None
        return int(described.stats.approximate_backlog_count) if described.HasField("stats") else None

    @typed
    async def force_breaker(
        self, service: str, state: Literal["open", "closed"], *, by: str | None = None, reason: str
    ) -> BreakerChange:
        """Force ``service``'s breaker ``open`` (no call reaches it and its steps wait, until
        forced ``closed``) or ``closed`` (its held steps start now); audited, so ``reason`` is required."""
        from sas.client.breakers import check_force, force

        if state not in ("open", "closed"):
            raise InvalidInput(f"unknown breaker state {state!r}: open or closed", field="state")
        check_force(service, reason)
        if self.team is not None:
            raise OutsideTeam(
                f"{service}'s breaker is every team's: this client acts for team {self.team} only, and did nothing",
                "ask the platform's operators (SAS_OPERATOR__TEAM unset)",
            )
        return await force(self.store, service, state, self._who(by, reason), reason)

    @typed
    async def list(self, state: str | None = None, limit: int = 50, *, team: str | None = None) -> TaskList:
        """The tasks of the state store, newest first (at most ``limit``; ``state``: only those,
        in any case; ``team``: only that team's types'), after every workflow stuck before the
        state store saw it (state ``Stuck``; not with a team). ``TaskList.tasks`` has each (``ListedTask``)."""
        from sas.client.listing import list_tasks

        return await list_tasks(self.store, state, limit, self._read_team(team))
