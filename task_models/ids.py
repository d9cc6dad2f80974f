"""Task ids are Temporal workflow ids, idempotency-key prefixes and primary keys at once."""

from __future__ import annotations

import re

# Printable ASCII only: the id ends up in HTTP headers, log lines and URLs.
TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
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
