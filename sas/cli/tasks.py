"""``sas submit | status | list | retry | compensate``: tasks through the Temporal client and the state store."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.common import Priority, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from sas.cli.output import CliError
from sas.settings import Settings
from sas.task_models import OperatorAnswer, OperatorRequest, TaskStatus, validate_task_id
from sas.task_models.ids import MAX_INCARNATION, validate_schedule_id
from sas.task_models.outbound import OutboundPolicy, outbound_context
from sas.task_models.strict_json import StrictJsonError, loads_strict
from sas.workflows.definitions import TaskDefinition
from sas.workflows.registry import by_workflow_name, task_types
from sas.workflows.summaries import delayed_start, task_details, task_summary


class _TaskTypes(Mapping[str, tuple[TaskDefinition, str]]):
    """Task type -> (its definition, its workflow type name): the registry's, read each time it
    is looked at (a copy made at import would miss a type registered since)."""

    def __getitem__(self, name: str) -> tuple[TaskDefinition, str]:
        found = task_types()[name]
        return found.definition, found.workflow_name

    def __iter__(self) -> Iterator[str]:
        return iter(task_types())

    def __len__(self) -> int:
        return len(task_types())


TASK_TYPES: Mapping[str, tuple[TaskDefinition, str]] = _TaskTypes()


def build_input(
    task_type: str,
    file: Path | None,
    flags: dict[str, Any],
    outbound: OutboundPolicy | None = None,
    flag_names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The task input from a JSON file (or '-' for stdin) overlaid with flags, validated; its
    callback URL against ``outbound`` (default: SAS_OUTBOUND__* from the settings). A bad value
    is named as it was given: its flag (``flag_names``, default ``FIELD_FLAGS``) or its field in the file."""
    flag_names = FIELD_FLAGS if flag_names is None else flag_names
    if task_type not in TASK_TYPES:
        raise CliError(
            f"--type {task_type!r}: unknown task type",
            f"use one of: {', '.join(TASK_TYPES) or 'none registered'} (`sas types` lists them; a package"
            " registers its own through the sas.task_types entry point group)",
        )
    data: dict[str, Any] = {}
    if file is not None:
        import sys

        text = sys.stdin.read() if str(file) == "-" else _read(file)
        try:
            data = loads_strict(text)
        except StrictJsonError as err:
            raise CliError(f"{file}: not valid JSON: {err}") from None
        if not isinstance(data, dict):
            raise CliError(f"{file}: expected a JSON object, got {type(data).__name__}")
    data.update({k: v for k, v in flags.items() if v is not None})
    model = TASK_TYPES[task_type][0].input_model
    if outbound is None:
        from sas.settings import get_settings

        outbound = get_settings().outbound
    try:
        return model.model_validate(data, context=outbound_context(outbound)).model_dump(mode="json")
    except ValidationError as err:
        given = {k for k, v in flags.items() if v is not None}
        problems = "\n".join(
            f"  {_where(e['loc'], given, file, flag_names)}: {in_words(e)}" for e in err.errors(include_input=False)
        )
        raise CliError(
            f"invalid {task_type}:\n{problems}", "fix the values above; `sas submit --help` lists the flags"
        ) from None


# The submit and schedule commands' flag for each input field (the others come from the JSON file).
FIELD_FLAGS = {
    "customer_id": "--customer",
    "sku": "--sku",
    "quantity": "--quantity",
    "amount_cents": "--amount-cents",
    "currency": "--currency",
    "card": "--card",
    "address": "--address",
}


def _where(loc: tuple[Any, ...], given: set[str], file: Path | None, flag_names: dict[str, str]) -> str:
    """Name a bad value as the user gave it: the flag, or the field of the JSON input."""
    field = ".".join(map(str, loc)) or "input"
    flag = flag_names.get(str(loc[0])) if loc else None
    source = "the JSON input" if file is not None and str(file) == "-" else str(file) if file is not None else None
    if loc and str(loc[0]) in given and flag:
        return flag
    if source is not None:
        return f"{field!r} in {source}" + (f" (or {flag})" if flag else "")
    return flag or f"{field!r}"


# What a pattern of the input models allows, in words (a raw regex tells a user little).
PATTERN_WORDS = {
    r"^[\x20-\x7e]+$": "printable ASCII only (letters, digits, spaces and punctuation)",
    r"^[\x21-\x7e]+$": "printable ASCII without spaces",
    r"^[A-Za-z0-9._-]+$": "letters, digits, '.', '_' and '-' only",
    r"^[A-Z]{3}$": "a three-letter currency code in capitals, e.g. EUR",
    r"^[0-9]{12,19}$": "a card number of 12 to 19 digits, without spaces",
    r"^[0-9]+$": "digits only",
}


def in_words(error: Any) -> str:
    """A pydantic error as a person reads it: what is allowed, never a raw regex."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    if kind == "string_pattern_mismatch":
        return "must be " + PATTERN_WORDS.get(str(ctx.get("pattern")), "in the documented form (see --help)")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "not a field of this task type"
    return str(error.get("msg", "invalid")).removeprefix("Value error, ")


def _read(file: Path) -> str:
    try:
        return file.read_text()
    except OSError as err:
        raise CliError(f"cannot read {file}: {err.strerror}") from None


def new_task_id(task_type: str) -> str:
    return f"{task_type}-{uuid.uuid4().hex[:12]}"


def check_task_id(task_id: str, flag: str | None = None) -> str:
    """The id, or a CliError saying what a task id may hold (naming ``flag`` when it came from one)."""
    try:
        return validate_task_id(task_id)
    except ValueError as err:
        raise CliError(f"{flag}: {err}" if flag else str(err)) from None


def operator_request(**fields: Any) -> OperatorRequest:
    """An operator request from ``--step``, ``--by`` and ``--reason``; a bad value is refused
    naming its flag, in words."""
    try:
        return OperatorRequest(**fields)
    except ValidationError as err:
        raise CliError(
            "; ".join(f"--{'.'.join(map(str, e['loc'])).replace('_', '-')}: {in_words(e)}" for e in err.errors())
        ) from None


def check_schedule_id(schedule_id: str) -> str:
    try:
        return validate_schedule_id(schedule_id)
    except ValueError as err:
        raise CliError(str(err)) from None


# Temporal's task priority keys: 1 goes first, 5 last; a task given none runs at the server's
# default (3). Activities inherit their workflow's priority, so every step of the task has it.
PRIORITY_RANGE = (1, 5)


def check_priority(priority: int | None) -> Priority:
    """Temporal's task priority for ``sas submit --priority``; CliError outside 1..5."""
    if priority is None:
        return Priority.default
    low, high = PRIORITY_RANGE
    if not low <= priority <= high:
        raise CliError(f"--priority must be {low} (most urgent) to {high} (least), got {priority}")
    return Priority(priority_key=priority)


async def submit(
    client: Client,
    settings: Settings,
    task_type: str,
    task_id: str,
    payload: dict[str, Any],
    start_delay: Any = None,
    priority: Priority = Priority.default,
) -> bool:
    """Start the task's workflow (id = task id). False if the id already names a task
    (running or finished): nothing new started; ``existing_task`` says which and what to do.
    ``priority`` is Temporal's task priority: a backlogged queue hands out urgent tasks first."""
    definition = TASK_TYPES[task_type][0]
    summary, details = task_summary(definition, task_id, payload), task_details(definition, task_id, payload)
    if start_delay:
        # Until it starts, these are all the UI can show of it: say when (issue 22).
        summary, details = delayed_start(task_id, summary, details, datetime.now(UTC) + start_delay)
    try:
        await client.start_workflow(
            TASK_TYPES[task_type][1],
            payload,
            id=task_id,
            task_queue=settings.temporal.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            start_delay=start_delay,
            priority=priority,
            # What the UI's list and workflow page show before the Scheduler has said anything.
            static_summary=summary,
            static_details=details,
        )
        return True
    except WorkflowAlreadyStartedError:
        return False


async def query_status(client: Client, task_id: str, run_id: str | None = None) -> TaskStatus | None:
    """The Scheduler's own answer (its newest run's, or ``run_id``'s), or None if Temporal has no such run."""
    try:
        return await client.get_workflow_handle(task_id, run_id=run_id).query(
            "status", result_type=TaskStatus, rpc_timeout=timedelta(seconds=5)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def newest_run(client: Client, task_id: str) -> tuple[str | None, str | None] | None:
    """The id's newest run: its status name (RUNNING, COMPLETED, ...) and its chain (the first
    run id, which a reset keeps); None if Temporal has no such workflow."""
    try:
        described = await client.get_workflow_handle(task_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = described.status.name if described.status is not None else None
    return status, described.raw_description.workflow_execution_info.first_run_id or None


async def update(
    client: Client, task_id: str, name: str, request: BaseModel, workflow_id: str | None = None
) -> OperatorAnswer:
    """Send an operator update to the task's Scheduler, or to ``workflow_id`` (the workflow that
    answers for the task: ``answering.py``); a rejection comes back as a CliError saying why."""
    from temporalio.client import WorkflowUpdateFailedError

    try:
        return await client.get_workflow_handle(workflow_id or task_id).execute_update(
            name, request, result_type=OperatorAnswer
        )
    except WorkflowUpdateFailedError as err:
        reason = getattr(err.cause, "message", None) or str(err.cause)
        raise CliError(f"{task_id}: rejected: {reason}", f"see `sas status {task_id}`") from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            if "completed" in err.message.lower():
                raise CliError(f"{task_id} has already finished", f"see `sas status {task_id}`") from None
            raise CliError(f"no task {task_id!r}", "check the id with `sas list`") from None
        raise


# A start further off than this is almost surely a typo (a year for a month); Temporal would
# hold the workflow, and its input, all that time.
MAX_START_DELAY = timedelta(days=366)


def parse_when(at: str | None, after: str | None) -> timedelta | None:
    """Start delay from --at (ISO 8601 time) or --in (e.g. 90s, 15m, 2h, 1d): after now, and
    at most ``MAX_START_DELAY`` ahead."""
    if at and after:
        raise CliError("give --at or --in, not both")
    if after:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd])\s*", after)
        if not match:
            raise CliError(f"--in {after!r}: use a number and a unit, e.g. 90s, 15m, 2h, 1d")
        delay = timedelta(seconds=float(match[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match[2]])
        what = f"--in {after}"
    elif at:
        try:
            when = datetime.fromisoformat(at)
        except ValueError:
            raise CliError(f"--at {at!r} is not an ISO 8601 time", "e.g. 2026-12-01T09:00:00+00:00") from None
        if when.tzinfo is None:
            when = when.astimezone()  # a local time, as a person means it
        delay = when - datetime.now(UTC)
        if delay.total_seconds() <= 0:
            raise CliError(f"--at {at} is in the past", "give a time to come, or --in DURATION")
        what = f"--at {at}"
    else:
        return None
    if delay > MAX_START_DELAY:
        raise CliError(f"{what} is more than {MAX_START_DELAY.days} days ahead", "give a nearer time")
    return delay


# ------------------------------------------------ a task id is one task, forever


async def existing_task(client: Client, task_id: str) -> CliError:
    """Why ``task_id`` cannot be submitted again: the task it already names, its state, what to do.

    The state comes from the mirror row when there is one (the newest Temporal run may be a
    refused reuse of the id, which says nothing about the task), else from Temporal."""
    from sas.cli import context
    from sas.runtime.failures import StateStoreUnreachable
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task

    temporal = await workflow_status(client, task_id)
    try:
        record = await context.with_read_session(lambda s: get_task(s, task_id))
        mirrored = record.task.state if record is not None else None
    except StateStoreUnreachable:
        mirrored = None  # the refusal still stands; Temporal's word is enough to explain it
    if temporal == "RUNNING":
        return CliError(
            f"task {task_id} is already running" + (f" ({mirrored})" if mirrored else "") + ": a task id is one task",
            f"follow it with `sas status {task_id} --follow`, or submit under a new id",
        )
    state = mirrored or (f"{temporal.lower()} in Temporal" if temporal else "unknown")
    how = (
        f"`sas resubmit {task_id} --reason …` runs it again as a new incarnation, or submit under a new id"
        if state in RESUBMITTABLE
        else "submit it under a new id"
    )
    return CliError(f"task {task_id} already exists and is {state}: a task id is one task", how)


async def workflow_status(client: Client, task_id: str) -> str | None:
    """The newest run's status name (RUNNING, COMPLETED, FAILED, …), or None if Temporal has none."""
    from sas.cli.answering import run_status

    return await run_status(client, task_id)


async def resubmit_finished(client: Client, task_id: str, by: str, reason: str, timeout_s: float = 60) -> int:
    """Run a finished Compensated or Error task again as its next incarnation; the new incarnation's number.

    The new run of the same workflow id carries the operator's request in its memo; its
    ``mirror.accept`` archives the finished rows, starts fresh ones under new idempotency keys
    and audits the resubmission, or refuses it if the task changed since we looked
    (another resubmission, a Processed task). We wait for that answer so the caller knows."""
    import asyncio

    from sas.cli import context
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.state_store.queries import get_task
    from sas.task_models import RESUBMIT_MEMO, Resubmission

    record = await context.with_read_session(lambda s: get_task(s, task_id))
    if record is None:
        raise CliError(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    task = record.task
    if task.state == "Processed":
        raise CliError(f"{task_id} is Processed: it is done and stays done", "submit a new task under a new id")
    if task.state not in RESUBMITTABLE:
        # Another operator's resubmission got there first, or the mirror is behind Temporal.
        if await workflow_status(client, task_id) == "RUNNING":
            raise CliError(
                f"{task_id} is running again (incarnation {task.incarnation}, {task.state}): nothing to resubmit",
                f"follow it with `sas status {task_id} --follow`",
            )
        raise CliError(
            f"{task_id} is {task.state} in the state store but its workflow is not running: not resubmitted",
            f"the state store is behind Temporal; see `sas show {task_id}` and `sas status {task_id}`",
        )
    if task.chain_id is None:
        raise CliError(f"{task_id} has no recorded run chain: it cannot be resubmitted", f"see `sas show {task_id}`")
    if task.incarnation >= MAX_INCARNATION:
        # The incarnation is part of every idempotency key, whose length is bounded (sas/task_models/ids.py).
        raise CliError(
            f"{task_id} has been run {task.incarnation} times, the most a task id can be: not resubmitted",
            "submit it under a new id",
        )
    request = Resubmission(of=task.chain_id, by=by, reason=reason)
    summary, details = resubmission_metadata(task.workflow_type, task_id, task.payload, task.incarnation + 1, by)
    try:
        handle = await client.start_workflow(
            task.workflow_type,
            task.payload,
            id=task_id,
            task_queue=task.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            memo={RESUBMIT_MEMO: request.model_dump()},
            static_summary=summary,
            static_details=details,
        )
    except WorkflowAlreadyStartedError:
        raise await existing_task(client, task_id) from None
    new_chain = handle.first_execution_run_id or handle.result_run_id

    async def answer() -> int | CliError | None:
        now = await context.with_read_session(lambda s: get_task(s, task_id))
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
            raise CliError(
                f"{task_id}: resubmitted, but no worker has accepted the new run within {timeout_s:.0f}s",
                f"it starts when a worker polls {task.task_queue}; follow it with `sas status {task_id} --follow`",
            )
        await asyncio.sleep(0.5)
    if isinstance(outcome, CliError):
        raise outcome
    return outcome


def resubmission_metadata(
    workflow_type: str, task_id: str, payload: dict[str, Any], incarnation: int, by: str
) -> tuple[str | None, str | None]:
    """The UI's summary and details of a resubmitted run: the task's own, saying which
    incarnation it is and who started it (the reason stays in the audit log)."""
    registered = by_workflow_name(workflow_type)
    if registered is None:
        return None, None
    definition = registered.definition
    summary = f"{task_summary(definition, task_id, payload)} · incarnation {incarnation}"
    details = (
        f"{task_details(definition, task_id, payload)}\n\n"
        f"**Incarnation {incarnation}**, resubmitted by {by} with `sas resubmit`;"
        f" `sas show {task_id}` lists the earlier ones."
    )
    return summary, details


async def _refused(handle: WorkflowHandle[Any, Any], task_id: str) -> CliError:
    """Why the resubmitted run ended before it was accepted, as the accept worded it (TaskIdReused)."""
    from temporalio.client import WorkflowFailureError

    try:
        await handle.result(follow_runs=False)
    except WorkflowFailureError as err:
        reason = getattr(err.cause, "message", None) or str(err.cause)
        return CliError(f"{task_id}: resubmission refused: {reason}", f"see `sas show {task_id}`")
    return CliError(f"{task_id}: the new run ended before it was accepted", f"see `sas show {task_id}`")
