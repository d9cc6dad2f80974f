"""Task ids are Temporal workflow ids, idempotency-key prefixes and primary keys at once.

sas derives ids of its own from a task's (its clean-up workflow's, its child tasks', its fan-out
batches', its idempotency keys), and Temporal derives each scheduled run's from its schedule's.
A task given one of those shapes would be taken for what sas derived: an order named
``cleanup-<victim>`` for the victim's clean-up, an order named ``<parent>:<step>`` for that
step's child. So those shapes are reserved: :func:`reserved_shape` is the one rule, and every
way a task is started (the task client, the CLI, a schedule, a workflow started directly, whose
input check is ``workflows/shell/acceptance.py``) refuses them through
:func:`validate_new_task_id`."""

from __future__ import annotations

import re

# Every id sas derives from a task id fits the limits of where it goes, because these bounds
# are checked where each part enters (tests/bad_input/test_id_bounds.py does the sums):
#   task id                      <= MAX_TASK_ID (128)      the tasks.task_id column, Temporal's workflow id
#   step name                    <= MAX_STEP_NAME (32)     declared in code (sas/task_types/names.py)
#   incarnation                  <= MAX_INCARNATION (9999) `sas resubmit` refuses beyond it
#   idempotency key  <task>#<n>:<step>:undo  <= 171        the remote services take 200 (Idempotency-Key)
#   clean-up workflow  cleanup-<task>        <= 136        Temporal takes 1000
#   schedule id                  <= MAX_SCHEDULE_ID (107)  each run's id, <schedule>-<time>, is a task id
MAX_TASK_ID = 128
MAX_STEP_NAME = 32
# A task type's, a service's and an action's name: each is part of activity names
# (<service>.<action>), task queues and setting keys (SAS_SERVICES__<NAME>__*), so the declarations
# and the settings take one shape.
NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
# A team's own service or task type is named under its team, ``<team>.<name>`` (``north.flights``),
# so that two teams may both declare ``flights``; whole, it fits where a plain name goes (40).
SCOPED_NAME = re.compile(r"(?=.{1,40}$)(?:[a-z][a-z0-9_]*\.)?[a-z][a-z0-9_]*")
MAX_SCOPED_NAME = 40


def service_settings(service: str) -> str:
    """Where a service's settings are: ``SAS_SERVICES__FLIGHTS``, or for a team's own
    (``north.flights``) ``SAS_TEAMS__NORTH__SERVICES__FLIGHTS``; its fields follow, ``__URL``."""
    return _setting("SERVICES", service)


def step_settings(task_type: str, step: str) -> str:
    """Where a task type's step's policy is set: ``SAS_STEPS__ORDER__CHARGE``, or for a team's
    type (``north.booking``) ``SAS_TEAMS__NORTH__STEPS__BOOKING__FLIGHT``."""
    return f"{_setting('STEPS', task_type)}__{step.upper()}"


def _setting(group: str, name: str) -> str:
    """``SAS_<GROUP>__<NAME>``, under its team for a team's own name (``north.flights``)."""
    team, dot, own = name.rpartition(".")
    return f"SAS_TEAMS__{team.upper()}__{group}__{own.upper()}" if dot else f"SAS_{group}__{own.upper()}"


def scoped_name(team: str | None, name: str) -> str:
    """``name`` under ``team`` (``north.flights``); the name itself without a team. Refused
    (ValueError) past 40 characters, where the state store's columns and settings keys end."""
    if team is None or name.startswith(f"{team}."):
        return name
    scoped = f"{team}.{name}"
    if len(scoped) > MAX_SCOPED_NAME:
        raise ValueError(
            f"{scoped!r}: a team's name and its own, with the dot, take at most {MAX_SCOPED_NAME} characters"
        )
    return scoped


MAX_INCARNATION = 9999
# Temporal names each scheduled run <schedule id>-<its time, RFC 3339 to the second>.
SCHEDULE_RUN_SUFFIX = len("-2026-01-01T00:00:00Z")
MAX_SCHEDULE_ID = MAX_TASK_ID - SCHEDULE_RUN_SUFFIX

# The clean-up workflow of a task: the Supervisor starts it for a task closed from outside, a
# parent for a completed child task it undoes.
CLEANUP_PREFIX = "cleanup-"


def cleanup_workflow_id(task_id: str) -> str:
    return f"{CLEANUP_PREFIX}{task_id}"


# Each run of a schedule is named by Temporal: <schedule id>-<its time, RFC 3339 to the second, UTC>.
_SCHEDULED_RUN = re.compile(r"(?P<schedule>.+)-\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
# What sas adds to a task id to name what it derives: a child task <task>:<step> (or
# <task>:<step>.<incarnation>), a fan-out batch <task>:<step>:batch-<n> (undo-<n>,
# cleanup-undo-<n>), every idempotency key <task>:<step> (<task>#<n>:<step>; '#' is never in a
# task id). A task id that held it could be taken for any of these.
DERIVED_SEPARATOR = ":"

# Printable ASCII only: the id ends up in HTTP headers, log lines and URLs.
TASK_ID_PATTERN = rf"^[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_TASK_ID - 1}}}$"
_TASK_ID = re.compile(TASK_ID_PATTERN)


def validate_task_id(task_id: str) -> str:
    """Return the id unchanged, or raise ValueError saying what is wrong with it."""
    if not isinstance(task_id, str):
        raise ValueError(f"task id must be a string, got {type(task_id).__name__}")
    if not _TASK_ID.fullmatch(task_id):
        # Show at most the start of a huge id: the message must stay readable (and small).
        shown = repr(task_id[:128]) + (f"... ({len(task_id)} characters)" if len(task_id) > 128 else "")
        raise ValueError(
            f"invalid task id {shown}: use 1-128 characters from A-Z a-z 0-9 . _ : -, starting with a letter or digit"
        )
    return task_id


def validate_schedule_id(schedule_id: str) -> str:
    """A schedule id is a task id short enough that its runs' ids (``<id>-<time>``) are too, and
    of no reserved shape, nor one that makes its runs' ids reserved (``cleanup``: cleanup-<time>)."""
    validate_task_id(schedule_id)
    _refuse_reserved("schedule id", schedule_id)
    if f"{schedule_id}-".startswith(CLEANUP_PREFIX):
        raise ValueError(
            f"schedule id {schedule_id!r} is reserved: its runs' ids, {schedule_id}-<time>, would start with"
            f" {CLEANUP_PREFIX!r}, the clean-up workflows' ids"
        )
    if len(schedule_id) > MAX_SCHEDULE_ID:
        raise ValueError(
            f"schedule id too long ({len(schedule_id)} characters): at most {MAX_SCHEDULE_ID}, so that each run's "
            f"task id, <schedule id>-<time>, fits in {MAX_TASK_ID}"
        )
    return schedule_id


def scheduled_run_of(task_id: str) -> str | None:
    """The schedule whose run ``task_id`` is named as (``<schedule id>-<time>``), or None when it
    is not shaped like a run of a schedule sas could have created."""
    match = _SCHEDULED_RUN.fullmatch(task_id)
    if match is None:
        return None
    schedule = match["schedule"]
    return schedule if _schedule_id_problem(schedule) is None else None


def reserved_shape(task_id: str) -> str | None:
    """Which of the ids sas (or Temporal, for a schedule) derives ``task_id`` is shaped like, in
    words; None when a new task may take it. The one rule: every entry point asks it."""
    if task_id.startswith(CLEANUP_PREFIX):
        return f"{CLEANUP_PREFIX}<task id> is the id of a task's clean-up workflow"
    if scheduled_run_of(task_id) is not None:
        return "<schedule id>-<time> is the id Temporal gives each run of a schedule"
    if DERIVED_SEPARATOR in task_id:
        return (
            f"'{DERIVED_SEPARATOR}' is kept for the ids sas derives from a task's: a child task's <task id>:<step>,"
            " a fan-out batch's <task id>:<step>:batch-<n>, every idempotency key"
        )
    return None


def validate_new_task_id(task_id: str) -> str:
    """The id a new task (a submission, a resubmission, a rescheduled start) may be given:
    a valid task id of no shape sas keeps for its own; else ValueError saying why."""
    validate_task_id(task_id)
    _refuse_reserved("task id", task_id)
    return task_id


def _refuse_reserved(what: str, given: str) -> None:
    shape = reserved_shape(given)
    if shape is not None:
        raise ValueError(
            f"{what} {given!r} is reserved: {shape}; give an id without '{DERIVED_SEPARATOR}'"
            f" that does not start with {CLEANUP_PREFIX!r}"
        )


def _schedule_id_problem(schedule_id: str) -> str | None:
    try:
        validate_schedule_id(schedule_id)
    except ValueError as err:
        return str(err)
    return None
