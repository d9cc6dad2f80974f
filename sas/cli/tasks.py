"""What ``sas submit`` and the operator commands take from the command line, checked and named
as the user typed it (the task's input: ``sas.cli.task_input``); the work is the task client's
(``sas.client``), whose typed errors read as these commands' own."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sas.cli.output import CliError
from sas.client.inputs import MAX_START_DELAY, PATTERN_WORDS, TASK_TYPES, in_words, new_task_id
from sas.client.inputs import check_task_id as _check_task_id
from sas.task_models.ids import validate_new_task_id, validate_schedule_id

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.common import Priority

    from sas.settings import Settings
    from sas.task_models import OperatorRequest

__all__ = [
    "MAX_START_DELAY",
    "PATTERN_WORDS",
    "PRIORITY_RANGE",
    "TASK_TYPES",
    "check_new_task_id",
    "check_priority",
    "check_schedule_id",
    "check_task_id",
    "in_words",
    "new_task_id",
    "operator_request",
    "parse_when",
    "submit",
]


def check_task_id(task_id: str, flag: str | None = None) -> str:
    """The id, or a CliError saying what a task id may hold (naming ``flag`` when it came from one)."""
    from sas.client.errors import InvalidInput

    try:
        return _check_task_id(task_id)
    except InvalidInput as err:
        raise CliError(f"{flag}: {err.message}" if flag else err.message) from None


def check_new_task_id(task_id: str, flag: str | None = None) -> str:
    """The id of a new run (a submission, a reschedule), or a CliError saying why it may not be
    one: an invalid id, or one of a shape sas keeps for its own (``sas.task_models.ids``)."""
    check_task_id(task_id, flag)
    try:
        return validate_new_task_id(task_id)
    except ValueError as err:
        raise CliError(f"{flag}: {err}" if flag else str(err)) from None


def operator_request(**fields: Any) -> OperatorRequest:
    """An operator request from ``--step``, ``--by`` and ``--reason``; a bad value is refused
    naming its flag, in words."""
    from sas.client.errors import InvalidInput
    from sas.client.operator import operator_request as checked

    try:
        return checked(**fields)
    except InvalidInput as err:
        raise CliError(err.message) from None


def check_schedule_id(schedule_id: str) -> str:
    try:
        return validate_schedule_id(schedule_id)
    except ValueError as err:
        raise CliError(str(err)) from None


PRIORITY_RANGE = (1, 5)


def check_priority(priority: int | None) -> Priority:
    """Temporal's task priority for ``sas submit --priority``; CliError outside 1..5."""
    from sas.client.errors import InvalidInput
    from sas.client.inputs import check_priority as checked

    try:
        return checked(priority, "--priority")
    except InvalidInput as err:
        raise CliError(err.message) from None


async def submit(
    client: Client,
    settings: Settings,
    task_type: str,
    task_id: str,
    payload: dict[str, Any],
    start_delay: Any = None,
    priority: Priority | None = None,
) -> bool:
    """Start the task's workflow (id = task id) with a checked payload, as every start is
    (``sas.client.submitting.start``, over ``start_task``); False if the id already names a task.
    The demo and the chaos run submit this way: a submit retried after an error must see False,
    where ``TaskClient.submit`` would ask the state store which task the id names."""
    from temporalio.common import Priority

    from sas.client.submitting import start

    return await start(
        client,
        settings.temporal.task_queue,
        task_type,
        task_id,
        payload,
        start_delay=start_delay,
        priority=priority or Priority.default,
    )


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
