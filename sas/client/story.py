"""A task's story, as ``sas show`` tells it: its steps, every attempt, decision and operator
action in time order, its alerts, its family and its earlier incarnations, from the state store.

A task the state store has no row for is told from what does know it: Temporal, for a delayed
start not yet run or a run that failed before sas accepted it; the audit log, for a delayed
task cancelled before it ran or a deleted schedule. Temporal is asked only then, so reading the
story of an accepted task loads nothing of Temporal's SDK (``sas show`` starts fast)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sas.client.errors import TaskNotFound
from sas.client.store import StateStore

if TYPE_CHECKING:
    from temporalio.client import Client

Told = Literal["task", "delayed", "actions", "unaccepted"]

# How long the story waits for Temporal's word on the run's priority before it is told without it.
SHARE_WITHIN_S = 5.0

_TASK = (
    "task_id",
    "task_type",
    "workflow_type",
    "task_queue",
    "state",
    "current_step",
    "incarnation",
    "created_at",
    "updated_at",
)
_STEP = (
    "name",
    "position",
    "state",
    "failure_count",
    "attempt",
    "complete_by",
    "locked_by",
    "last_error",
    "error_type",
    "permanent",
    "idempotency_key",
    "result",
    "note",
    "pivot",
)
_DECISION = (
    "id",
    "step",
    "kind",
    "failure_count",
    "observed_state",
    "reason",
    "decided_by",
    "decided_at",
    "signal_sent_at",
)
_ACTION = ("at", "step", "action", "actor", "reason", "changed")
_ALERT = (
    "id",
    "severity",
    "kind",
    "step",
    "failure_count",
    "message",
    "last_error",
    "suggested_action",
    "status",
    "resolution",
    "created_at",
    "resolved_at",
    "delivered_at",
)
_ATTEMPT = ("step", "state", "attempt", "failure_count", "locked_by", "complete_by", "started_at", "chain_id")


@dataclass(frozen=True)
class TaskStory:
    """Everything sas knows of one task, in time order (``TaskClient.show``).

    ``told`` says from what: ``task`` (the state store's rows: ``data`` has ``task``, ``steps``,
    ``history``, ``decisions``, ``operator_actions``, ``alerts``, ``attempts``, ``parent``,
    ``children``, ``archived_incarnations`` and, if asked for (``with_share``), ``share``),
    ``delayed`` (a start delay not yet over:
    ``data`` is what ``TaskClient.status`` says of it), ``actions`` (no rows, only its audit
    entries: a delayed task cancelled before it ran, a deleted schedule) or ``unaccepted``
    (its run failed before sas accepted it: ``data["reason"]`` is Temporal's word). ``state``
    is the task's state (None for ``actions``). ``data`` is what ``sas show --json`` prints."""

    task_id: str
    told: Told
    state: str | None
    data: dict[str, Any]

    @property
    def steps(self) -> list[dict[str, Any]]:
        """Each step's row: name, state, FailureCount, attempt, LockedBy, CompleteBy, result..."""
        return list(self.data.get("steps") or [])

    @property
    def history(self) -> list[dict[str, Any]]:
        """One time line of attempts, decisions and operator actions: at, step, what, who, detail."""
        return list(self.data.get("history") or [])

    @property
    def operator_actions(self) -> list[dict[str, Any]]:
        """The audit log's entries for the task: at, step, action, actor, reason, changed."""
        return list(self.data.get("operator_actions") or [])

    @property
    def alerts(self) -> list[dict[str, Any]]:
        """The task's alerts, oldest first."""
        return list(self.data.get("alerts") or [])


async def tell(store: StateStore, temporal: Callable[[], Awaitable[Client]], task_id: str) -> TaskStory:
    """The task's story from the state store, else from Temporal or the audit log (see the module)."""
    data = await store.read(lambda s: task_history(s, task_id))
    if data is not None:
        return TaskStory(task_id, "task", data["task"]["state"], data)
    from sas.client.status import closed_before_accepted, scheduled

    client = await temporal()
    later = await scheduled(client, task_id)
    if later is not None and later["state"] != "Cancelled":  # a cancelled one: its audited actions
        return TaskStory(task_id, "delayed", later["state"], later)
    actions = await store.read(lambda s: _actions(s, task_id))
    if actions:
        return TaskStory(task_id, "actions", None, {"task_id": task_id, "task": None, "operator_actions": actions})
    failed = await closed_before_accepted(client, task_id)
    if failed is not None and failed["state"] == "Failed":
        return TaskStory(task_id, "unaccepted", failed["state"], {**failed, "task": None, "operator_actions": []})
    raise TaskNotFound(f"no task {task_id!r} in the state store", "check the id with `sas list`")


async def with_share(story: TaskStory, temporal: Callable[[], Awaitable[Client]]) -> TaskStory:
    """``story`` with ``data["share"]``: the run's priority, team, fairness key and weight as
    Temporal keeps them (``priorities.share_of_run``), None if Temporal cannot say now (the rest
    of the story is the state store's, and stands). A story not told from the rows is left as it is."""
    if story.told == "task":
        story.data["share"] = await _share(temporal, story.task_id)
    return story


async def _share(temporal: Callable[[], Awaitable[Client]], task_id: str) -> dict[str, Any] | None:
    import asyncio

    from temporalio.service import RPCError

    from sas.client.priorities import share_of_run
    from sas.runtime.failures import TemporalUnreachable

    try:
        return await asyncio.wait_for(share_of_run(await temporal(), task_id), SHARE_WITHIN_S)
    except (TemporalUnreachable, RPCError, TimeoutError):
        return None


async def task_history(session: Any, task_id: str) -> dict[str, Any] | None:
    """The story of a task the state store has, as plain data, with ``history``: the attempts,
    decisions and operator actions merged in time order; None if it has no such task."""
    data = await _task_data(session, task_id)
    if data is not None:
        data["history"] = _history(data)
    return data


def _pick(row: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    return {c: getattr(row, c) for c in columns}


async def _actions(session: Any, task_id: str) -> list[dict[str, Any]]:
    from sas.state_store.queries import audit_for

    # sas's own entries have seq 0: time orders them among the operators'.
    return [_pick(e, _ACTION) for e in sorted(await audit_for(session, task_id), key=lambda e: e.at)]


async def _attempts_for(session: Any, task_id: str) -> list[Any]:
    from sqlalchemy import select

    from sas.state_store.tables import StepAttempt

    query = select(StepAttempt).where(StepAttempt.task_id == task_id).order_by(StepAttempt.started_at, StepAttempt.id)
    return list((await session.scalars(query)).all())


def _history(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One time line: each attempt (who held it, until when), decision and operator action."""
    from sas.task_models import StepState

    events: list[dict[str, Any]] = []
    for a in data["attempts"]:
        undo = a["state"] == StepState.COMPENSATING
        until = a["complete_by"].strftime("%H:%M:%S") if a["complete_by"] else "?"
        events.append(
            {
                "at": a["started_at"],
                "step": a["step"],
                "what": f"{'undo ' if undo else ''}attempt {a['attempt']}",
                "who": a["locked_by"],
                "detail": f"CompleteBy {until}, FailureCount {a['failure_count']}",
            }
        )
    for d in data["decisions"]:
        sent = "sent" if d["signal_sent_at"] else "pending"
        events.append(
            {
                "at": d["decided_at"],
                "step": d["step"],
                "what": f"decision: {d['kind']}",
                "who": d["decided_by"],
                "detail": f"FailureCount {d['failure_count']}, saw {d['observed_state']}, {sent}: {d['reason']}",
            }
        )
    for e in data["operator_actions"]:
        events.append(
            {
                "at": e["at"],
                "step": e["step"],
                "what": f"operator: {e['action']}",
                "who": e["actor"],
                "detail": e["changed"] + (f" ({e['reason']})" if e["reason"] else ""),
            }
        )
    return sorted(events, key=lambda e: e["at"])


async def _task_data(session: Any, task_id: str) -> dict[str, Any] | None:
    from sas.state_store.queries import alerts_for, archived_incarnations, children_of, decisions_for, get_task

    record = await get_task(session, task_id)
    if record is None:
        return None
    t = record.task
    return {
        # A child task's parent, and the child tasks of this one's child steps (ChildTask).
        "parent": {"task_id": t.parent_task_id, "step": t.parent_step} if t.parent_task_id else None,
        "children": [
            {"task_id": c.task_id, "step": c.parent_step, "task_type": c.task_type, "state": c.state}
            for c in await children_of(session, task_id)
        ],
        "task": _pick(t, _TASK),
        "steps": [_pick(s, _STEP) for s in record.steps],
        "decisions": [_pick(d, _DECISION) for d in await decisions_for(session, task_id)],
        "operator_actions": await _actions(session, task_id),
        "alerts": [_pick(a, _ALERT) for a in await alerts_for(session, task_id)],
        "attempts": [_pick(a, _ATTEMPT) for a in await _attempts_for(session, task_id)],
        "archived_incarnations": [
            {
                "incarnation": a.incarnation,
                "state": a.state,
                "chain_id": a.chain_id,
                "archived_at": a.archived_at,
                "steps": {
                    s["name"]: s["state"] for s in sorted(a.snapshot.get("steps", []), key=lambda s: s["position"])
                },
            }
            for a in await archived_incarnations(session, task_id)
        ],
    }
