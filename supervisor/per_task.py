"""One task's operation in a sweep, isolated from the others.

Every per-task operation of a sweep (looking at a task in Temporal, reconciling it, sending its
decision) runs through ``isolated``: within a time bound, and when it fails for that task's own
reasons (``sas/runtime/task_faults.py``) the task gets one alert naming it and the cause, and the
sweep goes on with the others. Before this, one task whose ``status`` query failed (its type no
longer registered, an answer too large for a message) failed the whole sweep activity, which
Temporal retried for ever: nothing was decided for any task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.runtime.task_faults import TaskFault, task_fault
from sas.supervisor.alert import raise_once
from sas.supervisor.models import AlertSpec

ALERT_KIND = "task_check_failed"
# Below the sweep activities' 10 s heartbeat timeout: a task that hangs costs its own bound,
# and the activity (which beats between tasks) is not timed out because of it.
TASK_TIMEOUT_S = 8.0
# A task that runs out of its bound once may only have met a loaded machine or a slow moment of
# Temporal's or the database's; the same task running out of it this many times in a row is the
# task's own doing. Every other fault is the same on every try and is alerted at once.
TIMEOUTS_BEFORE_ALERT = 3
# How many (task, operation) pairs the count above remembers: bounded, whatever the backlog.
_REMEMBERED = 10_000
_timeouts_in_a_row: dict[tuple[str, str], int] = {}

_Result = TypeVar("_Result")


async def isolated(
    sessions: async_sessionmaker[AsyncSession],
    task_id: str,
    what: str,
    job: Callable[[], Awaitable[_Result]],
    *,
    step: str | None = None,
    timeout_s: float = TASK_TIMEOUT_S,
) -> _Result | TaskFault:
    """``job``'s result, or the task's fault (already alerted) if it failed for the task's own reasons.
    A failure of the service itself (Temporal or the database away) is raised: the sweep is retried."""
    try:
        async with asyncio.timeout(timeout_s):
            result = await job()
    except Exception as err:
        fault = task_fault(err, timeout_s)
        if fault is None:
            raise
        if isinstance(err, TimeoutError) and not _timed_out_again(task_id, what):
            return fault  # the next sweep asks again
    else:
        _timeouts_in_a_row.pop((task_id, what), None)
        return result
    await alert_task_fault(sessions, task_id, what, fault, step=step)
    return fault


def _timed_out_again(task_id: str, what: str) -> bool:
    """Count one more timeout of this task's operation; whether it is now one too many."""
    key = (task_id, what)
    if key not in _timeouts_in_a_row and len(_timeouts_in_a_row) >= _REMEMBERED:
        _timeouts_in_a_row.pop(next(iter(_timeouts_in_a_row)))
    count = _timeouts_in_a_row[key] = _timeouts_in_a_row.get(key, 0) + 1
    return count >= TIMEOUTS_BEFORE_ALERT


async def alert_task_fault(
    sessions: async_sessionmaker[AsyncSession], task_id: str, what: str, fault: TaskFault, *, step: str | None = None
) -> None:
    """One open alert per task and operation, refreshed while the fault lasts."""
    spec = AlertSpec(
        severity="critical",
        kind=ALERT_KIND,
        message=f"task {task_id}: {what} failed: {fault.cause}"[:2000],
        suggested_action=(
            f"the Supervisor goes on without {task_id} for this {what}; fix the cause (`sas show {task_id}`, "
            "the Temporal UI: a worker build that registers its type, a smaller answer), then `sas alerts resolve`"
        ),
    )
    key = f"{ALERT_KIND}:{task_id}:{what}"
    await raise_once(sessions, spec, key, datetime.now(UTC), task_id=task_id, step=step)
