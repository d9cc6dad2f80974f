"""What the Supervisor exports to Prometheus, through the Temporal runtime's meter (so its
series sit beside the SDK's on the same endpoint): steps by state, overdue steps, open
alerts, sweep duration, decisions by kind, and each task queue's backlog to scale on."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity

from sas.state_store.tables import Alert, Step
from sas.task_models import StepState


def _meter():  # type: ignore[no-untyped-def]
    return activity.metric_meter() if activity.in_activity() else None


def record_sweep(phase: str, seconds: float) -> None:
    meter = _meter()
    if meter is not None:
        meter.create_histogram_timedelta(
            "sas_supervisor_sweep_duration", "Time a Supervisor sweep phase took", "ms"
        ).record(timedelta(seconds=seconds), {"phase": phase})


def record_decision(kind: str) -> None:
    meter = _meter()
    if meter is not None:
        meter.create_counter("sas_supervisor_decisions", "Supervisor decisions, by kind").add(1, {"kind": kind})


def record_backlog(queue: str, backlog: int, pollers: int) -> None:
    meter = _meter()
    if meter is None:
        return
    meter.create_gauge("sas_task_queue_backlog", "Approximate tasks waiting in a task queue").set(
        backlog, {"queue": queue}
    )
    meter.create_gauge("sas_task_queue_pollers", "Live pollers of a task queue").set(pollers, {"queue": queue})


class StoreGauges:
    """Counts over the whole state store. They cost a scan of an index, so they are
    refreshed at most every ``every_s`` seconds per process, and only when exported."""

    def __init__(self, every_s: float = 15.0) -> None:
        self._every_s = every_s
        self._last = 0.0

    async def refresh(self, session: AsyncSession, grace: timedelta) -> bool:
        meter = _meter()
        if meter is None or time.monotonic() - self._last < self._every_s:
            return False
        self._last = time.monotonic()
        counts = dict((await session.execute(select(Step.state, func.count()).group_by(Step.state))).all())
        steps = meter.create_gauge("sas_steps", "Step rows in the state store, by state")
        for state in StepState:
            steps.set(int(counts.get(state.value, 0)), {"state": state.value})
        cutoff = datetime.now(UTC) - grace
        overdue = await session.scalar(
            select(func.count())
            .select_from(Step)
            .where(
                Step.state.in_([StepState.PROCESSING.value, StepState.COMPENSATING.value]), Step.complete_by < cutoff
            )
        )
        meter.create_gauge("sas_steps_overdue", "Processing steps past CompleteBy (plus grace)").set(int(overdue or 0))
        open_alerts = await session.scalar(select(func.count()).select_from(Alert).where(Alert.status == "open"))
        meter.create_gauge("sas_alerts_open", "Open operator alerts").set(int(open_alerts or 0))
        return True
