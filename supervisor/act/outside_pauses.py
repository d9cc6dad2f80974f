"""A step paused with Temporal's own tools, not ``sas park``: made visible as what it is.

``temporal activity pause`` and the UI's pause stop an Agent's retries just as ``sas park``
does, but nothing of sas hears of it: the step row stays Processing, the task is in no sas
view, and the Supervisor, finding the activity paused, only put its look off, for ever. When
the Supervisor finds a step whose activity Temporal shows paused while its row does not say
Error, it marks the row (and its task) Error, as ``sas park`` would, so ``sas list --state
error`` and ``sas show`` list it, and raises one alert naming who paused it and why, and what
to do: ``sas retry`` unpauses it (attempts reset), ``sas compensate`` undoes the task.

A fan-out step's items run in its batch child workflows: a paused item holds its batch, and the
batch its step, so the item's pause parks the step as a step's own would. The Supervisor sees
it when the step overruns its complete-by (the look describes the task's running batches,
``temporal_view.look``), and sooner at the orphan check of a quiet task
(``outside_pauses_in``), which looks at the items of its running batches.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo

from sas.reconciliation.temporal_view import TemporalView
from sas.state_store.mirror import mark_step
from sas.state_store.rows import StepRow
from sas.supervisor.alert import log_alert, raise_in
from sas.supervisor.models import AlertSpec
from sas.task_models import StepState, TaskState

PAUSED = (
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED,
)


def paused_outside_sas(step: StepRow, pending: PendingActivityInfo | None) -> bool:
    """Whether Temporal shows the step's activity paused while its row says nothing of it."""
    return pending is not None and pending.state in PAUSED and step.state != StepState.ERROR


async def outside_pauses_in(
    sessions: async_sessionmaker[AsyncSession], view: TemporalView, steps: list[StepRow], now: datetime
) -> int:
    """Park each running fan-out step whose item ``view`` shows paused in one of its batches;
    how many were. A step's own paused activity is left to the look before a decision (its
    complete-by is one attempt's): ``sas park`` pauses it too, and marks the row only once
    Temporal confirms the pause, which a look here in between would take for an outside one."""
    found = 0
    for step in steps:
        if step.state not in (StepState.PROCESSING, StepState.COMPENSATING):
            continue
        pending = view.activity_for((step.agent, step.compensation))
        batch = view.batch_of(pending) if pending is not None else None
        if pending is not None and batch is not None and paused_outside_sas(step, pending):
            await record_outside_pause(sessions, step, step.version, pending, now, batch=batch)
            found += 1
    return found


async def record_outside_pause(
    sessions: async_sessionmaker[AsyncSession],
    step: StepRow,
    version: int,
    pending: PendingActivityInfo,
    now: datetime,
    *,
    batch: str | None = None,
) -> None:
    """Mark the paused step's row and task Error (if the row is still as read) and alert once,
    together. ``batch``: the fan-out batch whose item the activity is, if the look knows it."""
    who, why = "someone", ""
    if pending.HasField("pause_info") and pending.pause_info.HasField("manual"):
        who = pending.pause_info.manual.identity or who
        why = pending.pause_info.manual.reason
    what = "undo" if step.state == StepState.COMPENSATING else "step"
    activity = f"activity {pending.activity_type.name}"
    if batch is not None:
        activity = f"item {activity} (activity {pending.activity_id} of its batch {batch})"
    spec = AlertSpec(
        severity="warning",
        kind="paused_outside_sas",
        message=(
            f"task {step.task_id}: {what} {step.name}'s {activity} was paused in Temporal "
            f"by {who}" + (f" ({why})" if why else "") + ", not with `sas park`; it is listed as parked (Error)"
        ),
        suggested_action=(
            f"`sas retry {step.task_id}` unpauses it (attempts reset); `sas compensate {step.task_id}` undoes the task"
        ),
    )
    # One transaction: whoever sees the task listed as parked also finds the alert saying why.
    async with sessions() as session, session.begin():
        await mark_step(session, step.task_id, step.name, (step.state, version), StepState.ERROR, TaskState.ERROR, now)
        key = f"paused_outside_sas:{step.task_id}:{step.name}"
        new = await raise_in(session, spec, key, now, task_id=step.task_id, step=step.name)
    if new:
        log_alert(spec, step.task_id, step.name, 0, None)
