"""Where an order's time went, read from its history (bench/latency.py ``--breakdown``).

Each workflow task splits into its wait (scheduled to started: the server matching it to a
poller) and its run (started to completed: the worker's activation and the server recording
the commands); each activity likewise into its wait and its run (started to completed: the
Agent's own work, its mirror writes and the remote call). Whatever of the history's span is
left (the server between one event and the next) is ``other``. Timestamps are the server's.
"""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType

PARTS = ("wft_wait", "wft_run", "activity_wait", "activity_run", "other")


@dataclass
class Breakdown:
    """One order's history, in milliseconds."""

    span: float = 0.0
    wft_wait: list[float] = field(default_factory=list)
    wft_run: list[float] = field(default_factory=list)
    activity_wait: list[float] = field(default_factory=list)
    activity_run: list[float] = field(default_factory=list)

    def total(self, part: str) -> float:
        if part == "other":
            return self.span - sum(self.total(p) for p in PARTS if p != "other")
        return sum(getattr(self, part))


def _ms(event: Any) -> float:
    return float(event.event_time.ToMicroseconds()) / 1000.0


def breakdown(events: list[Any]) -> Breakdown:
    """The parts of one closed workflow's history."""
    out = Breakdown(span=_ms(events[-1]) - _ms(events[0]))
    at: dict[int, float] = {}  # scheduled, then started, time by the scheduling event's id
    wft_scheduled = wft_started = 0.0
    for event in events:
        kind, t = event.event_type, _ms(event)
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            wft_scheduled = t
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            out.wft_wait.append(t - wft_scheduled)
            wft_started = t
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            out.wft_run.append(t - wft_started)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            at[event.event_id] = t
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            scheduled = event.activity_task_started_event_attributes.scheduled_event_id
            out.activity_wait.append(t - at[scheduled])
            at[scheduled] = t
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            out.activity_run.append(t - at[event.activity_task_completed_event_attributes.scheduled_event_id])
    return out


async def sample(client: Any, workflow_ids: list[str]) -> list[Breakdown]:
    """The breakdown of each of these (closed) workflows, a few histories fetched at a time."""
    limit = asyncio.Semaphore(8)

    async def one(workflow_id: str) -> Breakdown:
        async with limit:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        return breakdown(list(history.events))

    return list(await asyncio.gather(*(one(w) for w in workflow_ids)))


def medians(found: list[Breakdown]) -> dict[str, float]:
    """Per part, the median over the orders of its total; and per workflow task and activity in
    turn (``wft_wait_1``...), the median of that one."""
    out = {part: statistics.median(b.total(part) for b in found) for part in PARTS}
    for part in PARTS[:-1]:
        for i in range(max(len(getattr(b, part)) for b in found)):
            values = [getattr(b, part)[i] for b in found if len(getattr(b, part)) > i]
            out[f"{part}_{i + 1}"] = statistics.median(values)
    return out


def line(found: list[Breakdown]) -> str:
    """One round's medians, ms: each part's total, then its pieces in turn."""
    m = medians(found)
    pieces = []
    for part in PARTS:
        turns = [m[k] for k in sorted(m, key=_turn) if k.startswith(part + "_") and k[len(part) + 1 :].isdigit()]
        pieces.append(f"{part}={m[part]:.1f}" + (" (" + "/".join(f"{v:.0f}" for v in turns) + ")" if turns else ""))
    return " ".join(pieces)


def _turn(key: str) -> tuple[str, int]:
    name, _, n = key.rpartition("_")
    return (name, int(n)) if n.isdigit() else (key, 0)
