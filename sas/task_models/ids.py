"""Task ids are Temporal workflow ids, idempotency-key prefixes and primary keys at once."""

from __future__ import annotations

import re

# Every id sas derives from a task id fits the limits of where it goes, because these bounds
# are checked where each part enters (tests/bad_input/test_id_bounds.py does the sums):
#   task id                      <= MAX_TASK_ID (128)      the tasks.task_id column, Temporal's workflow id
#   step name                    <= MAX_STEP_NAME (32)     declared in code (workflows/definitions.py)
#   incarnation                  <= MAX_INCARNATION (9999) `sas resubmit` refuses beyond it
#   idempotency key  <task>#<n>:<step>:undo  <= 171        the remote services take 200 (Idempotency-Key)
#   clean-up workflow  cleanup-<task>        <= 136        Temporal takes 1000
#   schedule id                  <= MAX_SCHEDULE_ID (107)  each run's id, <schedule>-<time>, is a task id
MAX_TASK_ID = 128
MAX_STEP_NAME = 32
MAX_INCARNATION = 9999
# Temporal names each scheduled run <schedule id>-<its time, RFC 3339 to the second>.
SCHEDULE_RUN_SUFFIX = len("-2026-01-01T00:00:00Z")
MAX_SCHEDULE_ID = MAX_TASK_ID - SCHEDULE_RUN_SUFFIX

# The clean-up workflow of a task: the Supervisor starts it for a task closed from outside, a
# parent for a completed child task it undoes.
CLEANUP_PREFIX = "cleanup-"


def cleanup_workflow_id(task_id: str) -> str:
    return f"{CLEANUP_PREFIX}{task_id}"


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
    """A schedule id is a task id short enough that its runs' ids (``<id>-<time>``) are too."""
    validate_task_id(schedule_id)
    if len(schedule_id) > MAX_SCHEDULE_ID:
        raise ValueError(
            f"schedule id too long ({len(schedule_id)} characters): at most {MAX_SCHEDULE_ID}, so that each run's "
            f"task id, <schedule id>-<time>, fits in {MAX_TASK_ID}"
        )
    return schedule_id
