"""Parking (``sas park``, ``TaskClient.park``): take a task's step out of play until an operator says otherwise.

Two cases, by what Temporal shows:

- the step waits for a decision (Failed, CompensationFailed): the same ``park`` signal the
  Supervisor sends. The Scheduler marks the step and the task Error and mirrors it itself;
  ``sas retry`` then re-runs the step through the Scheduler's ``request_retry`` update.
- the step's Agent is running or between Temporal's quick retries (a hung call, say):
  Temporal's activity pause. No further attempt starts while it is paused. An attempt under
  way learns of the pause at its next heartbeat (the Agent heartbeats while it waits for
  the service), hangs up and ends as failed (``ActivityPause``); the next attempt, after
  ``sas retry``, sends the same idempotency key, so an effect the hung call did have is not
  repeated. The Scheduler is not told - it still awaits its activity - so once
  Temporal confirms the pause, sas marks the step and the task Error in the mirror, with a
  compare-and-set on the row it read and without raising its version, so any later write of
  the Scheduler or the Agent still wins. The Supervisor does not scan Error steps, and for a
  paused activity it waits (``sas.task_models.pauses`` is the one rule of what paused is).
  ``sas retry`` unpauses it with its attempts reset and marks the row running again.

Each park and un-park is audited. Both work from the one describe of the workflow that answers
for the task (``answering.py``); only the confirmation that Temporal took a pause or an unpause
in describes it again.

A fan-out step's items run in its batch child workflows: an item paused there (``temporal
activity pause`` on the batch; the Supervisor lists its step as parked) holds its batch, and the
batch its step. ``sas retry`` unpauses every paused item of the task's running batches (attempts
reset), and ``sas compensate`` does too once the task has taken the request in (``operator.py``):
an item left paused would keep its batch, and so the undo, waiting for ever. The batches are
described only when the task's workflow shows some running.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.api.workflowservice.v1 import PauseActivityRequest, UnpauseActivityRequest
from temporalio.client import Client, WorkflowExecutionStatus

from sas.client import audit
from sas.client.answering import Answering, answering_workflow
from sas.client.errors import InvalidInput, NotApplicable, NotConfirmed, TaskNotFound
from sas.client.store import StateStore
from sas.state_store.rows import StepRow
from sas.task_models import StepState, TaskState
from sas.task_models.fanout import batch_activities, running_batches
from sas.task_models.pauses import is_paused

_WAITING = (StepState.FAILED, StepState.COMPENSATION_FAILED)
# How long the Scheduler may take to apply a park signal before we say it has not yet.
_SIGNAL_WAIT_S = 30.0


@dataclass(frozen=True)
class Target:
    """The step to park, as the mirror and Temporal show it."""

    task_id: str
    workflow_id: str  # the workflow that answers for the task: its Scheduler, or its clean-up
    run_id: str
    step: str
    state: str
    version: int
    agent: str
    compensation: str | None
    activity: PendingActivityInfo | None

    @property
    def undo(self) -> bool:
        return self.activity is not None and self.activity.activity_type.name == self.compensation


async def park_step(
    client: Client,
    store: StateStore,
    task_id: str,
    step: str | None,
    by: str,
    reason: str,
    confirm_within_s: float = _SIGNAL_WAIT_S,
) -> str:
    """Park the task's running or waiting step, in the workflow that answers for it; what was done.
    ``NotConfirmed`` if Temporal (or the Scheduler's mirror write) does not show it within
    ``confirm_within_s``."""
    target = await _find(store, await answering_workflow(client, task_id), step)
    if target.activity is None:
        if target.state == StepState.ERROR:
            return f"step {target.step} is already parked (Error); nothing changed"
        return await _park_waiting(client, store, target, by, reason, confirm_within_s)
    if is_paused(target.activity):
        return f"step {target.step} is already parked (its activity is paused); nothing changed"
    return await _park_running(client, store, target, by, reason, confirm_within_s)


async def _find(store: StateStore, answers: Answering, step: str | None) -> Target:
    """The step to act on: ``step``, else the one whose Agent Temporal shows pending, else
    the one waiting for a decision, as ``answers`` described the workflow that answers for the
    task. Refuses a task that no running workflow answers for (its Scheduler, or once that is
    closed, its clean-up: ``answering.py``)."""
    from sas.state_store.queries import get_task

    task_id, workflow_id, described = answers.task_id, answers.workflow_id, answers.described
    if described is None:
        raise TaskNotFound(f"no task {task_id!r}", "check the id with `sas list`")
    if described.status != WorkflowExecutionStatus.RUNNING:
        status = described.status.name.lower() if described.status else "closed"
        raise NotApplicable(f"{task_id} has ended ({status}): nothing to park", f"see `sas show {task_id}`")
    record = await store.read(lambda s: get_task(s, task_id))
    if record is None or not record.steps:
        raise NotApplicable(f"{task_id} has not started yet: nothing to park", f"`sas cancel {task_id}` cancels it")
    pending = list(described.raw_description.pending_activities)

    def activity_of(row: StepRow) -> PendingActivityInfo | None:
        names = (row.agent, row.compensation)
        return next((a for a in pending if a.activity_type.name in names), None)

    names = [s.name for s in record.steps]
    if step is not None and step not in names:
        raise InvalidInput(f"unknown step {step!r}; the steps are {', '.join(names)}")
    candidates = [s for s in record.steps if step in (None, s.name)]
    row = next((s for s in candidates if activity_of(s) is not None), None) or next(
        (s for s in candidates if s.state in _WAITING or s.state == StepState.ERROR), None
    )
    if row is None:
        which = f"step {step} is {candidates[0].state}" if step else f"the task is {record.task.state}"
        raise NotApplicable(f"{task_id}: {which}: no step is running or waiting to park", f"see `sas status {task_id}`")
    return Target(
        task_id=task_id,
        workflow_id=workflow_id,
        run_id=described.run_id,
        step=row.name,
        state=row.state,
        version=row.version,
        agent=row.agent,
        compensation=row.compensation,
        activity=activity_of(row),
    )


async def _park_waiting(
    client: Client, store: StateStore, target: Target, by: str, reason: str, confirm_within_s: float
) -> str:
    """The Supervisor's own path: the park signal, then wait until the Scheduler has mirrored it."""
    from sas.state_store.queries import get_task
    from sas.task_models import OperatorRequest

    request = OperatorRequest(by=by, reason=reason or "parked by an operator", step=target.step)
    parks_before = await _parks_audited(store, target)
    await client.get_workflow_handle(target.workflow_id).signal("park", request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + confirm_within_s
    while True:
        record = await store.read(lambda s: get_task(s, target.task_id))
        state = next((s.state for s in record.steps if s.name == target.step), None) if record else None
        # The Error row can be gone by the next look: a service that compensates what waits for
        # an operator (docs/api.md) moves the step on at once. The audit entry the Scheduler
        # writes after it stays.
        if state == StepState.ERROR or await _parks_audited(store, target) > parks_before:
            break
        if loop.time() > deadline:
            raise NotConfirmed(
                f"{target.task_id}: park sent, but step {target.step} is still {state} after {confirm_within_s:.0f}s",
                f"the Scheduler applies it when a worker runs it; see `sas status {target.task_id}`",
            )
        await asyncio.sleep(0.3)
    # The workflow that applied the signal audits it (every request is audited where it is applied).
    return f"step {target.step} parked as Error"


async def _parks_audited(store: StateStore, target: Target) -> int:
    """How many parks of the step the task has audited (each applied park is, once applied)."""
    from sas.state_store.queries import audit_for

    entries = await store.read(lambda s: audit_for(s, target.task_id))
    return sum(1 for e in entries if e.action == "park" and e.step == target.step)


async def _park_running(
    client: Client, store: StateStore, target: Target, by: str, reason: str, confirm_within_s: float
) -> str:
    assert target.activity is not None  # _park routes only a target with an activity here
    activity = target.activity
    async with audit.audited(store, target.task_id, "park", by, reason, step=target.step) as entry:
        await client.workflow_service.pause_activity(
            PauseActivityRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=target.workflow_id, run_id=target.run_id),
                identity=by,
                id=activity.activity_id,
                reason=reason or "parked with sas",
            )
        )
        # The mirror follows Temporal: write it only once Temporal shows the pause.
        if not await _paused_now(
            client, target.workflow_id, target.run_id, activity.activity_id, want=True, within_s=confirm_within_s
        ):
            raise NotConfirmed(
                f"{target.task_id}: Temporal did not confirm the pause", f"see `sas status {target.task_id}`"
            )
        changed_rows = await store.session(lambda s: _mark(s, target, to_step=StepState.ERROR, to_task=TaskState.ERROR))
        what = "undo" if target.undo else "step"
        changed = (
            f"{target.step} {target.state} -> Error: {what} activity {activity.activity_type.name}"
            f" (attempt {activity.attempt}) paused in Temporal"
        )
        if not changed_rows:
            changed += "; the mirror had moved on and was left as it is"
        entry.changed = changed
    return f"{what} {target.step} parked: its activity is paused in Temporal"


async def unpark(
    client: Client, store: StateStore, answers: Answering, step: str | None, by: str, reason: str
) -> str | None:
    """``sas retry`` of a step parked by pausing its activity: unpause it (attempts reset) and
    mark the row running again. None if the workflow that answers for the task (as ``answers``
    described it) has no paused activity: the Scheduler's ``request_retry`` handles every other case."""
    task_id, described = answers.task_id, answers.described
    if described is None:
        return None
    # Temporal first, and only: a task with no paused activity needs nothing from the state store here.
    if not any(is_paused(a) for a in described.raw_description.pending_activities):
        items = await paused_items(client, answers)
        return await _unpause_items(client, store, answers, items, step, by, reason) if items else None
    try:
        target = await _find(store, answers, step)
    except (TaskNotFound, NotApplicable, InvalidInput):
        return None
    activity = target.activity
    if activity is None or not is_paused(activity):
        return None
    async with audit.audited(store, task_id, "retry", by, reason, step=target.step) as entry:
        await client.workflow_service.unpause_activity(
            UnpauseActivityRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=target.workflow_id, run_id=target.run_id),
                identity=by,
                id=activity.activity_id,
                reset_attempts=True,
            )
        )
        if not await _paused_now(client, target.workflow_id, target.run_id, activity.activity_id, want=False):
            raise NotConfirmed(f"{task_id}: Temporal did not confirm the unpause", f"see `sas status {task_id}`")
        running = StepState.COMPENSATING if target.undo else StepState.PROCESSING
        rows = await store.session(
            lambda s: _mark(s, target, to_step=running, to_task=TaskState(running), seen=StepState.ERROR)
        )
        changed = f"{target.step} {target.state} -> {running}: activity {activity.activity_type.name} unpaused, attempts reset"
        if not rows:
            changed += "; the mirror had moved on and was left as it is"
        entry.changed = changed
    return f"retrying {target.step}: its activity is unpaused in Temporal"


async def paused_items(client: Client, answers: Answering) -> dict[str, list[PendingActivityInfo]]:
    """The paused fan-out items of the task's running batches, by batch (as ``answers`` described
    the workflow that answers for the task, a Scheduler or a clean-up: both start batches)."""
    described = answers.described
    ids = running_batches(described.raw_description) if described is not None else []
    if not ids:
        return {}
    found = await batch_activities(client, ids)
    paused = {batch: [a for a in items if is_paused(a)] for batch, items in found.items()}
    return {batch: items for batch, items in paused.items() if items}


async def unpause_items(client: Client, items: dict[str, list[PendingActivityInfo]], by: str) -> int:
    """Unpause each paused item (attempts reset), and wait until Temporal shows it; how many."""
    for batch, activities in items.items():
        for activity in activities:
            await client.workflow_service.unpause_activity(
                UnpauseActivityRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=batch),
                    identity=by,
                    id=activity.activity_id,
                    reset_attempts=True,
                )
            )
    for batch, activities in items.items():
        for activity in activities:
            if not await _paused_now(client, batch, None, activity.activity_id, want=False):
                raise NotConfirmed(
                    f"Temporal did not confirm the unpause of activity {activity.activity_id} of {batch}",
                    f"`temporal activity unpause --workflow-id {batch} --activity-id {activity.activity_id}`",
                )
    return sum(len(a) for a in items.values())


async def _unpause_items(
    client: Client,
    store: StateStore,
    answers: Answering,
    items: dict[str, list[PendingActivityInfo]],
    step: str | None,
    by: str,
    reason: str,
) -> str | None:
    """``sas retry`` of a fan-out held by its paused items: unpause them, and mark the step's row
    running again if it was listed as parked. None if no step of the task runs their Agent."""
    from sas.state_store.queries import get_task

    task_id = answers.task_id
    names = {a.activity_type.name for activities in items.values() for a in activities}
    record = await store.read(lambda s: get_task(s, task_id))
    rows = [r for r in (record.steps if record else []) if names & {r.agent, r.compensation} and step in (None, r.name)]
    if not rows:
        return None
    row = rows[0]
    undo = row.compensation in names and row.agent not in names
    target = Target(
        task_id, answers.workflow_id, "", row.name, row.state, row.version, row.agent, row.compensation, None
    )
    async with audit.audited(store, task_id, "retry", by, reason, step=row.name) as entry:
        count = await unpause_items(client, items, by)
        running = StepState.COMPENSATING if undo else StepState.PROCESSING
        marked = await store.session(
            lambda s: _mark(s, target, to_step=running, to_task=TaskState(running), seen=StepState.ERROR)
        )
        changed = (
            f"{row.name} {row.state} -> {running}: {count} fan-out items unpaused in their batches, attempts reset"
        )
        if row.state == StepState.ERROR and not marked:
            changed += "; the mirror had moved on and was left as it is"
        entry.changed = changed
    return f"retrying {row.name}: {count} paused items unpaused in Temporal"


async def _paused_now(
    client: Client, workflow_id: str, run_id: str | None, activity_id: str, want: bool, within_s: float = 10.0
) -> bool:
    """Whether Temporal shows the activity paused (``want`` True) or not, within ``within_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
        found = next((a for a in described.raw_description.pending_activities if a.activity_id == activity_id), None)
        if found is None:
            return not want  # it ended meanwhile: nothing left paused
        if is_paused(found) == want:
            return True
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.2)


async def _mark(session: AsyncSession, target: Target, to_step: str, to_task: str, seen: str | None = None) -> int:
    """Set the step's and the task's state if the step row is still as we read it, through the
    mirror's one writer (an operator's mark). The version stays: the Scheduler's and the
    Agents' next writes are newer and win."""
    from datetime import UTC, datetime

    from sas.state_store.mirror import mark_step

    read = (seen or target.state, target.version)
    async with session.begin():
        marked = await mark_step(session, target.task_id, target.step, read, to_step, to_task, datetime.now(UTC))
    return int(marked)
