"""What the task client's starts and operator actions return: a task ``Submitted``, an
``ActionResult``, a ``BulkResult``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sas.client.selection import Result


@dataclass(frozen=True)
class Submitted:
    """A task that was started: its id, its type, and when it starts (None: now)."""

    task_id: str
    task_type: str
    starts_at: datetime | None = None


@dataclass(frozen=True)
class ActionResult:
    """What an operator action did: ``message`` in words, as the workflow or Temporal answered;
    ``incarnation`` for a resubmission that ran the task again; ``data`` the action's details
    (``sas cancel --json`` and ``sas reschedule --json`` print them)."""

    task_id: str
    message: str
    incarnation: int | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: one ``bulk.Result`` per task (``ok``, ``skipped`` or ``failed``,
    with the reason), and ``more`` when the selection's limit cut it short."""

    bulk_id: str
    results: list[Result]
    more: bool
