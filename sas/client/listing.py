"""The tasks of the state store, newest first (``TaskClient.list``), and the workflows stuck
before the mirror saw them: a workflow stuck in workflow task failures before its first write
has no row, and the Supervisor's ``workflow_stuck`` alert (from Temporal's reported problems) is
how it is known."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sas.client.errors import InvalidInput
from sas.client.store import StateStore

# The state of a workflow stuck in workflow task failures before the mirror saw it.
STUCK = "Stuck"
MAX_LIMIT = 10_000
# Stuck workflows listed beside the mirror's tasks, however small the limit is: each is a
# workflow that cannot move, so every one is shown (not the first 50 of 112).
STUCK_SHOWN = 10_000


@dataclass(frozen=True)
class ListedTask:
    """One task of ``TaskClient.list``: ``in_mirror`` False for a workflow stuck before the
    state store saw it (``state`` Stuck, no type or step known, ``why`` the alert's words).
    ``failure_count`` is the highest of its steps'."""

    task_id: str
    task_type: str | None
    state: str
    current_step: str | None
    failure_count: int
    updated_at: datetime
    in_mirror: bool
    why: str | None = None

    @property
    def data(self) -> dict[str, Any]:
        """The task as ``sas list --json`` prints it (``why`` only for a stuck one)."""
        out = {
            "task_id": self.task_id,
            "task_type": self.task_type,
            "state": self.state,
            "current_step": self.current_step,
            "failure_count": self.failure_count,
            "updated_at": self.updated_at,
            "in_mirror": self.in_mirror,
        }
        return out if self.in_mirror else {**out, "why": self.why}


@dataclass(frozen=True)
class TaskList:
    """What ``TaskClient.list`` found: ``state`` the state asked for, as the state store spells
    it (None: any), and ``tasks``, the stuck workflows first, then the mirror's newest first."""

    state: str | None
    tasks: list[ListedTask]

    @property
    def stuck(self) -> list[ListedTask]:
        """The workflows stuck before the state store saw them."""
        return [t for t in self.tasks if not t.in_mirror]

    @property
    def in_mirror(self) -> list[ListedTask]:
        """The state store's tasks."""
        return [t for t in self.tasks if t.in_mirror]


def check_state(state: str | None) -> str | None:
    """A task state by its name in any case (or Stuck), as the state store spells it."""
    from sas.task_models import TaskState

    if state is None:
        return None
    by_name = {s.value.lower(): s.value for s in TaskState} | {STUCK.lower(): STUCK}
    wanted = by_name.get(state.lower())
    if wanted is None:
        raise InvalidInput(
            f"--state {state!r}: unknown state", f"use one of: {', '.join(by_name.values())}", field="state"
        )
    return wanted


async def list_tasks(store: StateStore, state: str | None, limit: int, team: str | None = None) -> TaskList:
    """The stuck workflows first (unless ``state`` names another, or a ``team`` is asked for:
    a stuck one has no type yet), then the mirror's tasks in ``state`` (any) of ``team``'s types
    (any), newest first, at most ``limit`` of them."""
    from sas.state_store.queries import failure_counts, stuck_before_the_mirror
    from sas.state_store.queries import list_tasks as query

    wanted = check_state(state)
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"--limit {limit}: must be 1 to {MAX_LIMIT}", field="limit")
    types = None
    if team is not None:
        from sas.client.teams import team_types  # the task types, read only for a team

        types = team_types(team)

    async def load(session: Any) -> TaskList:
        stuck = await stuck_before_the_mirror(session, STUCK_SHOWN) if wanted in (None, STUCK) and not types else []
        rows = await query(session, wanted, limit, types) if wanted != STUCK else []
        counts = await failure_counts(session, [t.task_id for t in rows])
        return TaskList(
            wanted,
            [ListedTask(str(a.task_id), None, STUCK, None, 0, a.updated_at, False, a.message) for a in stuck]
            + [
                ListedTask(
                    t.task_id, t.task_type, t.state, t.current_step, counts.get(t.task_id, 0), t.updated_at, True
                )
                for t in rows
            ],
        )

    return await store.read(load)
