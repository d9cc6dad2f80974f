"""What a bulk action acts on and what it did, as plain types: a ``Selection`` of tasks, the
tasks it ``Selected``, and a ``Result`` per task. Light on purpose: the ``sas`` command builds
its options from these bounds before anything heavy is imported (``sas --help`` stays fast)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from sas.state_store.selection import SelectedTask, TaskFilter

Action = Literal["retry", "compensate", "resubmit"]
Outcome = Literal["ok", "skipped", "failed"]

DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 32
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_QUERY_CHARS = 2000
# One task's action, all told: a describe, an update (which waits for a worker to take it in),
# or a new incarnation that a worker must accept (resubmit_finished waits for it).
TASK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Selection:
    """Which tasks a bulk action acts on: a state-store filter (task or step states, step,
    changed within ``since``, task type), or a visibility ``query``, or an ``incident``'s tasks;
    at most ``limit`` of them. ``described`` is the selection in words (the CLI's flags)."""

    limit: int
    query: str | None = None
    task_states: tuple[str, ...] = ()
    step_states: tuple[str, ...] = ()
    step: str | None = None
    since: timedelta | None = None
    task_type: str | None = None
    incident: int | None = None
    described: list[str] = field(default_factory=list)

    def task_filter(self, now: datetime) -> TaskFilter:
        from sas.state_store.selection import TaskFilter

        return TaskFilter(
            task_states=self.task_states,
            step_states=self.step_states,
            step=self.step,
            since=now - self.since if self.since is not None else None,
            task_type=self.task_type,
        )

    def describe(self) -> str:
        """The selection as flags, for headers and hints."""
        return " ".join(self.described)


@dataclass(frozen=True)
class Result:
    """What happened to one selected task."""

    task_id: str
    outcome: Outcome
    reason: str


@dataclass
class Selected:
    """The tasks a selection picked, oldest change first, and whether ``--limit`` cut it short."""

    tasks: list[SelectedTask]
    more: bool
