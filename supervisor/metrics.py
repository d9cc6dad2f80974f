"""What the Supervisor exports to Prometheus, through the Temporal runtime's meter (so its
series sit beside the SDK's on the same endpoint): steps by state, overdue steps, open
alerts, sweep duration, decisions by kind, and each task queue's backlog to scale on."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from temporalio import activity

from sas.state_store.queries import overdue_steps, step_counts
from sas.state_store.tables import Alert
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


def record_service_queue(service: str, queue: str, backlog: int, pollers: int) -> None:
    """A remote service's own activity queue: what to scale that service's workers on."""
    meter = _meter()
    if meter is None:
        return
    attrs = {"service": service, "queue": queue}
    meter.create_gauge("sas_service_backlog", "Agent calls waiting in a remote service's task queue").set(
        backlog, attrs
    )
    meter.create_gauge("sas_service_pollers", "Live activity pollers of a remote service's task queue").set(
        pollers, attrs
    )


def record_breakers(services: list[str], holding: Iterable[str]) -> None:
    """1 while a service's circuit breaker holds its work (open, or half-open waiting on a probe)."""
    meter = _meter()
    if meter is None:
        return
    held = set(holding)
    gauge = meter.create_gauge("sas_breaker_holding", "1 while a remote service's circuit breaker holds its work")
    for service in services:
        gauge.set(int(service in held), {"service": service})


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
        counts = await step_counts(session)
        steps = meter.create_gauge("sas_steps", "Step rows in the state store, by state")
        for state in StepState:
            steps.set(int(counts.get(state.value, 0)), {"state": state.value})
        cutoff = datetime.now(UTC) - grace
        overdue = await overdue_steps(session, (StepState.PROCESSING.value, StepState.COMPENSATING.value), cutoff)
        meter.create_gauge("sas_steps_overdue", "Processing steps past CompleteBy (plus grace)").set(int(overdue or 0))
        open_alerts = await session.scalar(select(func.count()).select_from(Alert).where(Alert.status == "open"))
        meter.create_gauge("sas_alerts_open", "Open operator alerts").set(int(open_alerts or 0))
        return True
