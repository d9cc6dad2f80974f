"""Heartbeats that keep an attempt's checkpoint.

Temporal keeps only the latest heartbeat's details, so a heartbeat sent without them (an Agent
waiting on the state store, a slow remote call) would wipe the progress a multi-part step saved.
Every heartbeat an Agent sends goes through ``beat``, which repeats the attempt's checkpoint: the
one it saved, else the one a previous attempt left.

A checkpoint travels sealed (``sas.task_models.seals``): any client of the namespace may
heartbeat a running activity with details of its own, and a retried attempt must not skip parts
on its word. An unsealed one is ignored, which is always safe: each part has its own idempotency
key, so starting over sends nothing twice.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from temporalio import activity

from sas.task_models import seals

# This attempt's progress, as last saved (each activity runs in its own task, so its own context).
_progress: ContextVar[dict[str, int] | None] = ContextVar("sas_checkpoint", default=None)


def _identity() -> tuple[str, str, str, str]:
    info = activity.info()
    return info.workflow_id or "", info.workflow_run_id or "", info.activity_type, info.activity_id


def _sealed(progress: dict[str, int]) -> dict[str, Any]:
    return {"checkpoint": progress, "seal": seals.checkpoint_seal(*_identity(), progress)}


def _previous() -> dict[str, Any] | None:
    """The checkpoint an earlier attempt of this activity saved, if an Agent of sas sealed it."""
    details = activity.info().heartbeat_details
    kept = details[0] if details else None
    if not isinstance(kept, dict):
        return None
    progress = kept.get("checkpoint")
    if not isinstance(progress, dict) or not seals.checkpoint_sealed(*_identity(), progress, kept.get("seal")):
        return None
    return progress


def beat() -> None:
    """Tell Temporal this attempt is alive, keeping its checkpoint."""
    progress = _progress.get() or _previous()
    if progress is None:
        activity.heartbeat()
    else:
        activity.heartbeat(_sealed(progress))


def save_checkpoint(**progress: int) -> None:
    """Record this attempt's progress in its heartbeat details; a retried attempt reads it back
    with ``last_checkpoint`` and resumes there instead of starting over."""
    _progress.set(progress)
    activity.heartbeat(_sealed(progress))


def last_checkpoint(field: str) -> int:
    """How far an earlier attempt of this step got: ``field`` of the last heartbeat details
    Temporal kept for it (see ``save_checkpoint``); 0 on a first attempt or without any.

    A checkpoint saves work, it does not make work safe to repeat: each part has its own
    idempotency key, so a part sent again is answered from the service's record, not done twice."""
    value = (_previous() or {}).get(field)
    # Heartbeat details come back through the payload converter: a plain JSON int, or junk.
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
