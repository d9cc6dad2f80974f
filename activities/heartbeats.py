"""Heartbeats that keep an attempt's checkpoint.

Temporal keeps only the latest heartbeat's details, so a heartbeat sent without them (an Agent
waiting on the state store, a slow remote call) would wipe the progress a multi-part step saved.
Every heartbeat an Agent sends goes through ``beat``, which repeats the attempt's checkpoint: the
one it saved, else the one a previous attempt left.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from temporalio import activity

# This attempt's progress, as last saved (each activity runs in its own task, so its own context).
_progress: ContextVar[dict[str, int] | None] = ContextVar("sas_checkpoint", default=None)


def _previous() -> dict[str, Any] | None:
    details = activity.info().heartbeat_details
    progress = details[0] if details else None
    return progress if isinstance(progress, dict) else None


def beat() -> None:
    """Tell Temporal this attempt is alive, keeping its checkpoint."""
    progress = _progress.get() or _previous()
    if progress is None:
        activity.heartbeat()
    else:
        activity.heartbeat(progress)


def save_checkpoint(**progress: int) -> None:
    """Record this attempt's progress in its heartbeat details; a retried attempt reads it back
    with ``last_checkpoint`` and resumes there instead of starting over."""
    _progress.set(progress)
    activity.heartbeat(progress)


def last_checkpoint(field: str) -> int:
    """How far an earlier attempt of this step got: ``field`` of the last heartbeat details
    Temporal kept for it (see ``save_checkpoint``); 0 on a first attempt or without any.

    A checkpoint saves work, it does not make work safe to repeat: each part has its own
    idempotency key, so a part sent again is answered from the service's record, not done twice."""
    value = (_previous() or {}).get(field)
    # Heartbeat details come back through the payload converter: a plain JSON int, or junk.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
