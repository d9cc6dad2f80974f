"""``TaskClient``'s schedules: recurring tasks through Temporal Schedules (``sas.client.schedules``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sas.client import inputs
from sas.client.core import ClientCore, typed
from sas.client.errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import BaseModel

    from sas.client.schedules import ScheduleChange, ScheduleView


class ScheduleCalls(ClientCore):
    """The schedules of ``TaskClient`` (its part for ``sas schedule``)."""

    @typed
    async def create_schedule(
        self,
        schedule_id: str,
        task_type: str,
        task_input: BaseModel | Mapping[str, Any],
        *,
        cron: str | None = None,
        every: str | None = None,
        priority: int | None = None,
    ) -> ScheduleChange:
        """Create a schedule whose runs are tasks of ``task_type`` with ``task_input``: at
        ``cron`` (five fields, or ``@daily`` and the like) or ``every`` (``15m``, ``1h``,
        ``1d``: from ``SAS_SCHEDULES__MIN_INTERVAL_S`` to 366 days), exactly one of them. Each
        run's task id is ``<schedule_id>-<time>``; ``priority`` each run's, 1 to 5 (default 3).
        A run still going when the next is due delays the next. ``TaskIdTaken`` if a schedule
        of that id exists."""
        from sas.client import schedules
        from sas.task_models.ids import validate_schedule_id

        try:
            validate_schedule_id(schedule_id)
        except ValueError as err:
            raise InvalidInput(str(err), field="schedule_id") from None
        inputs.definition(task_type)
        self._for_team(task_type)
        payload = inputs.validate_input(task_type, task_input, self.settings.outbound)
        schedule = schedules.build_schedule(
            task_type,
            payload,
            schedule_id,
            self.settings.temporal.task_queue,
            cron,
            every,
            self.settings.schedules.min_interval_s,
            priority=inputs.check_priority(priority),
        )
        return await schedules.create(await self._temporal(), schedule_id, schedule)

    @typed
    async def schedules(self) -> list[ScheduleView]:
        """Every schedule (of a client of one team: those that start its team's tasks), with its
        next run times and its last runs' task ids (``ScheduleView``)."""
        from sas.client.schedules import list_schedules

        return await list_schedules(await self._temporal(), self.team)

    @typed
    async def pause_schedule(self, schedule_id: str, *, reason: str = "") -> ScheduleChange:
        """Pause a schedule: no new runs until unpaused (``reason`` is shown in the UI)."""
        from sas.client.schedules import change

        return await change(await self._temporal(), schedule_id, "pause", reason, self.team)

    @typed
    async def unpause_schedule(self, schedule_id: str, *, reason: str = "") -> ScheduleChange:
        """Resume a paused schedule (``reason`` is shown in the UI)."""
        from sas.client.schedules import change

        return await change(await self._temporal(), schedule_id, "unpause", reason, self.team)

    @typed
    async def delete_schedule(self, schedule_id: str) -> ScheduleChange:
        """Delete a schedule (runs already started go on)."""
        from sas.client.schedules import change

        return await change(await self._temporal(), schedule_id, "delete", "", self.team)
