"""Starting a task the one right way, and starting a finished one again as its next incarnation.

Every run of a task that sas starts - ``sas submit`` and ``TaskClient.submit``, the demo, a
reschedule, a resubmission (one task or bulk) and each run of a schedule - is started by
``start_task`` (a schedule's runs by the action ``schedule_action`` builds), from one
``TaskStart``: so the id rules, the task queue, the priority, the UI's summary, the memo and
the search attributes cannot differ between them, and the client must use sas's data converter.

A task id is one task, forever: a start never reuses an id (``REJECT_DUPLICATE``, ``FAIL`` on
conflict), and a refused start says which task the id names and what to do instead. Two starts
may reuse one: a reschedule, only after the delayed run it terminated (``ALLOW_DUPLICATE_FAILED_ONLY``),
and a resubmission, which the accepting run allows or refuses (``mirror.accept``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from temporalio.client import Client, WorkflowHandle
from temporalio.common import Priority, TypedSearchAttributes, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from sas.client.answering import run_status
from sas.client.errors import InvalidInput, NotApplicable, NotConfirmed, TaskIdTaken, TaskNotFound
from sas.client.inputs import TASK_TYPES
from sas.client.priorities import TEAM_MEMO, deployment_teams, priority_of_run, share_of, with_share
from sas.client.priorities import priority_of as priority_of  # where sas.client.delayed reads it
from sas.client.store import StateStore
from sas.task_models import RESUBMIT_MEMO, Resubmission, TaskState
from sas.task_models.ids import MAX_INCARNATION, validate_new_task_id, validate_schedule_id
from sas.workflows.registry import by_workflow_name
from sas.workflows.summaries import delayed_start, task_details, task_summary

if TYPE_CHECKING:
    from temporalio.client import ScheduleActionStartWorkflow

    from sas.settings.teams import TeamSettings

# How a start may meet a run already under its id.
Reuse = Literal["never", "after_terminated", "resubmission"]
_REUSE = {
    # A task id is one task: nothing new starts under an id that names one, running or finished.
    "never": WorkflowIDReusePolicy.REJECT_DUPLICATE,
    # A reschedule: only after the delayed run it terminated; a task that finished is never run again.
    "after_terminated": WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    # A resubmission: the accepting run allows it, or refuses it (mirror.accept).
    "resubmission": WorkflowIDReusePolicy.ALLOW_DUPLICATE,
}


@dataclass(frozen=True)
class TaskStart:
    """One run of a task, as it is started: what every start path fills in, and nothing else.

    ``priority`` is Temporal's task priority (a backlogged queue hands out urgent tasks first;
    the steps inherit it): a run started again (rescheduled, resubmitted) keeps the one it had.
    Its fairness key and weight are the task type's (``sas.client.priorities``), whatever it
    says, by ``teams`` (None: this process's ``SAS_TEAMS__*``).
    ``resubmission`` (with ``incarnation``): the operator's request, carried in the memo for the
    accepting run, and said in the UI's summary."""

    task_id: str
    workflow_type: str
    payload: dict[str, Any]
    task_queue: str
    priority: Priority = Priority.default
    start_delay: timedelta | None = None
    reuse: Reuse = "never"
    resubmission: Resubmission | None = None
    incarnation: int = 1
    search_attributes: TypedSearchAttributes = field(default_factory=lambda: TypedSearchAttributes.empty)
    teams: Mapping[str, TeamSettings] | None = None


class RunOf(Protocol):
    """A task that has a run (the state store's row, a delayed run): what a new run of it repeats."""

    @property
    def task_id(self) -> str: ...
    @property
    def workflow_type(self) -> str: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def task_queue(self) -> str: ...


def run_again(task: RunOf, *, priority: Priority, reuse: Reuse, **options: Any) -> TaskStart:
    """A new run of the same task: its id, type, input and queue as they were, as urgent as it
    was (``priority``), under ``reuse``; ``options`` the rest of ``TaskStart``."""
    return TaskStart(
        task_id=task.task_id,
        workflow_type=task.workflow_type,
        payload=task.payload,
        task_queue=task.task_queue,
        priority=priority,
        reuse=reuse,
        **options,
    )


def new_task(
    task_type: str,
    task_id: str,
    payload: dict[str, Any],
    task_queue: str,
    *,
    start_delay: timedelta | None = None,
    priority: Priority = Priority.default,
    teams: Mapping[str, TeamSettings] | None = None,
) -> TaskStart:
    """The start of a new task of a registered ``task_type`` (id = task id)."""
    return TaskStart(
        task_id=task_id,
        workflow_type=TASK_TYPES[task_type][1],
        payload=payload,
        task_queue=task_queue,
        priority=priority,
        start_delay=start_delay or None,
        teams=teams,
    )


def _options(start: TaskStart) -> dict[str, Any]:
    """What a run is started with, for a start now and a schedule's action alike: its queue, its
    priority with its type's fair share, the UI's summary and details (what the list and the
    workflow page show before the Scheduler has said anything) and its memo (a resubmission's
    request, the team); its search attributes are passed beside them (the two calls name that
    argument differently)."""
    summary, details = _metadata(start)
    share = share_of(start.workflow_type, start.payload, deployment_teams() if start.teams is None else start.teams)
    memo: dict[str, Any] = {RESUBMIT_MEMO: start.resubmission.model_dump()} if start.resubmission is not None else {}
    if share.team is not None:
        memo[TEAM_MEMO] = share.team
    return {
        "task_queue": start.task_queue,
        "priority": with_share(start.priority, share),
        "static_summary": summary,
        "static_details": details,
        "memo": memo or None,
    }


def _metadata(start: TaskStart) -> tuple[str | None, str | None]:
    registered = by_workflow_name(start.workflow_type)
    if registered is None:
        return None, None  # not a type of this deployment's: nothing to say of it
    definition, task_id, payload = registered.definition, start.task_id, start.payload
    if start.resubmission is not None:
        return resubmission_metadata(start.workflow_type, task_id, payload, start.incarnation, start.resubmission)
    summary, details = task_summary(definition, task_id, payload), task_details(definition, task_id, payload)
    if start.start_delay:
        # Until it starts, these are all the UI can show of it: say when.
        summary, details = delayed_start(task_id, summary, details, datetime.now(UTC) + start.start_delay)
    return summary, details


def _check_converter(client: Client) -> None:
    """The input, the memo and every result travel as sas's pydantic JSON (encrypted when keys
    are set): a client with another converter would start runs no worker can read."""
    from temporalio.contrib.pydantic import PydanticPayloadConverter

    if not issubclass(client.data_converter.payload_converter_class, PydanticPayloadConverter):
        raise NotApplicable(
            "this Temporal client does not use sas's data converter: nothing started",
            "build it with sas.runtime.connect.connect (or TaskClient.connect)",
        )


async def start_task(client: Client, start: TaskStart) -> WorkflowHandle[Any, Any] | None:
    """Start the run (workflow id = task id); None if the id's rules refuse it (a run under the
    id that ``start.reuse`` does not allow): nothing new started. The one place sas starts a
    task's workflow (tests/client/test_one_start.py keeps it so)."""
    _check_converter(client)
    try:
        # No run under an id of a shape sas keeps for its own (sas.task_models.ids).
        validate_new_task_id(start.task_id)
    except ValueError as err:
        raise InvalidInput(str(err), field="task_id") from None
    try:
        return await client.start_workflow(
            start.workflow_type,
            start.payload,
            id=start.task_id,
            id_reuse_policy=_REUSE[start.reuse],
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=start.start_delay,
            search_attributes=start.search_attributes,
            **_options(start),
        )
    except WorkflowAlreadyStartedError:
        return None


def schedule_action(start: TaskStart) -> ScheduleActionStartWorkflow:
    """What a schedule starts at each run: the run ``start`` says, under the id
    ``<schedule>-<time>`` Temporal makes from ``start.task_id`` (the schedule's id), so each run
    is its own task. The only place sas builds a schedule's action."""
    from temporalio.client import ScheduleActionStartWorkflow

    if start.start_delay or start.resubmission is not None or start.reuse != "never":
        raise ValueError("a schedule's runs are new tasks, started when due")
    validate_schedule_id(start.task_id)
    # Each run's id is <schedule>-<time>; the summary names the schedule that started it.
    options = _options(
        TaskStart(
            task_id=f"{start.task_id}-<time>",
            workflow_type=start.workflow_type,
            payload=start.payload,
            task_queue=start.task_queue,
            priority=start.priority,
            search_attributes=start.search_attributes,
            teams=start.teams,
        )
    )
    return ScheduleActionStartWorkflow(
        start.workflow_type,
        start.payload,
        id=start.task_id,
        typed_search_attributes=start.search_attributes,
        **options,
    )


async def start(
    client: Client,
    task_queue: str,
    task_type: str,
    task_id: str,
    payload: dict[str, Any],
    start_delay: timedelta | None = None,
    priority: Priority = Priority.default,
    teams: Mapping[str, TeamSettings] | None = None,
) -> bool:
    """Start a new task of ``task_type`` on ``task_queue`` (``start_task``). False if the id
    already names a task (running or finished): nothing new started."""
    started = await start_task(
        client,
        new_task(task_type, task_id, payload, task_queue, start_delay=start_delay, priority=priority, teams=teams),
    )
    return started is not None


async def existing_task(client: Client, store: StateStore, task_id: str) -> TaskIdTaken:
    """Why ``task_id`` cannot be submitted again: the task it already names, its state, what to do.

    The state comes from the mirror row when there is one (the newest Temporal run may be a
    refused reuse of the id, which says nothing about the task), else from Temporal."""
    from sas.runtime.failures import StateStoreUnreachable
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task

    temporal = await run_status(client, task_id)
    try:
        record = await store.read(lambda s: get_task(s, task_id))
        mirrored = record.task.state if record is not None else None
    except StateStoreUnreachable:
        mirrored = None  # the refusal still stands; Temporal's word is enough to explain it
    if temporal == "RUNNING":
        return TaskIdTaken(
            f"task {task_id} is already running" + (f" ({mirrored})" if mirrored else "") + ": a task id is one task",
            f"follow it with `sas status {task_id} --follow`, or submit under a new id",
            state=mirrored or "Running",
        )
    state = mirrored or (f"{temporal.lower()} in Temporal" if temporal else "unknown")
    how = (
        f"`sas resubmit {task_id} --reason …` runs it again as a new incarnation, or submit under a new id"
        if state in RESUBMITTABLE
        else "submit it under a new id"
    )
    return TaskIdTaken(f"task {task_id} already exists and is {state}: a task id is one task", how, state=state)


async def resubmit_finished(
    client: Client,
    store: StateStore,
    task_id: str,
    by: str,
    reason: str,
    timeout_s: float = 60,
    *,
    from_step: str | None = None,
    force: bool = False,
) -> int:
    """Run a finished Compensated or Error task again as its next incarnation; the new incarnation's number.
    ``from_step``: a redrive from that step (``sas.client.redrive``), the steps before it kept.

    The new run of the same workflow id carries the operator's request in its memo; its
    ``mirror.accept`` archives the finished rows, starts fresh ones under new idempotency keys
    and audits the resubmission, or refuses it if the task changed since we looked
    (another resubmission, a Processed task). We wait for that answer so the caller knows."""
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task

    record = await store.read(lambda s: get_task(s, task_id))
    if record is None:
        raise TaskNotFound(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    task = record.task
    if task.state == TaskState.PROCESSED:
        raise NotApplicable(f"{task_id} is Processed: it is done and stays done", "submit a new task under a new id")
    if task.state not in RESUBMITTABLE:
        # Another operator's resubmission got there first, or the mirror is behind Temporal.
        if await run_status(client, task_id) == "RUNNING":
            raise NotApplicable(
                f"{task_id} is running again (incarnation {task.incarnation}, {task.state}): nothing to resubmit",
                f"follow it with `sas status {task_id} --follow`",
            )
        raise NotApplicable(
            f"{task_id} is {task.state} in the state store but its workflow is not running: not resubmitted",
            f"the state store is behind Temporal; see `sas show {task_id}` and `sas status {task_id}`",
        )
    if task.chain_id is None:
        raise NotApplicable(
            f"{task_id} has no recorded run chain: it cannot be resubmitted", f"see `sas show {task_id}`"
        )
    if task.incarnation >= MAX_INCARNATION:
        # The incarnation is part of every idempotency key, whose length is bounded (sas/task_models/ids.py).
        raise NotApplicable(
            f"{task_id} has been run {task.incarnation} times, the most a task id can be: not resubmitted",
            "submit it under a new id",
        )
    handle = await start_task(
        client,
        run_again(
            task,
            # The task is the same task: as urgent as its finished run was.
            priority=await priority_of_run(client, task_id, task.run_id),
            reuse="resubmission",
            resubmission=Resubmission(of=task.chain_id, by=by, reason=reason, from_step=from_step, force=force),
            incarnation=task.incarnation + 1,
        ),
    )
    if handle is None:
        raise await existing_task(client, store, task_id)
    new_chain = handle.first_execution_run_id or handle.result_run_id

    async def answer() -> int | NotApplicable | None:
        now = await store.read(lambda s: get_task(s, task_id))
        if now is not None and now.task.chain_id == new_chain:
            return now.task.incarnation
        # This run's own status: a later run of the id (another operator's) says nothing about it.
        description = await handle.describe()
        if description.status is not None and description.status.name != "RUNNING":
            return await _refused(handle, task_id)
        return None

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while (outcome := await answer()) is None:
        if loop.time() > deadline:
            raise NotConfirmed(
                f"{task_id}: resubmitted, but no worker has accepted the new run within {timeout_s:.0f}s",
                f"it starts when a worker polls {task.task_queue}; follow it with `sas status {task_id} --follow`",
            )
        await asyncio.sleep(0.5)
    if isinstance(outcome, NotApplicable):
        raise outcome
    return outcome


def resubmission_metadata(
    workflow_type: str, task_id: str, payload: dict[str, Any], incarnation: int, request: Resubmission
) -> tuple[str | None, str | None]:
    """The UI's summary and details of a resubmitted (or redriven) run: the task's own, saying
    which incarnation it is and who started it (the reason stays in the audit log)."""
    registered = by_workflow_name(workflow_type)
    if registered is None:
        return None, None
    definition = registered.definition
    redriven = f" · redriven from {request.from_step}" if request.from_step else ""
    summary = f"{task_summary(definition, task_id, payload)} · incarnation {incarnation}{redriven}"
    how = (
        f"redriven from step {request.from_step} by {request.by} with `sas redrive`, the steps before it kept"
        if request.from_step
        else f"resubmitted by {request.by} with `sas resubmit`"
    )
    details = (
        f"{task_details(definition, task_id, payload)}\n\n"
        f"**Incarnation {incarnation}**, {how}; `sas show {task_id}` lists the earlier ones."
    )
    return summary, details


async def _refused(handle: WorkflowHandle[Any, Any], task_id: str) -> NotApplicable:
    """Why the resubmitted run ended before it was accepted, as the accept worded it (TaskIdReused)."""
    from temporalio.client import WorkflowFailureError

    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        reason = getattr(err.cause, "message", None) or str(err.cause)
        return NotApplicable(f"{task_id}: resubmission refused: {reason}", f"see `sas show {task_id}`")
    return NotApplicable(f"{task_id}: the new run ended before it was accepted", f"see `sas show {task_id}`")
