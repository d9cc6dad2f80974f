"""A batch of orders with known faults, and the one outcome each must reach however many
Supervisors act on it, whenever they are killed: its end state, its decisions (each
exactly once), one alert per incident, one effect per action in the ledger."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sas.task_models import TaskResult, TaskStatus
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig


@dataclass(frozen=True)
class Expected:
    state: str
    decisions: list[tuple[str, str, int]]  # (kind, step, FailureCount), waits left out
    alert_kinds: set[str]
    ledger: dict[str, int]
    ship_runs: int


DONE = {"reserve": 1, "charge": 1, "ship": 1, "release": 0, "refund": 0}
UNDONE = {"reserve": 1, "charge": 1, "ship": 0, "release": 1, "refund": 1}

# What each kind of order must come to with failure_threshold 3 (two retries, then compensate).
KINDS: dict[str, Expected] = {
    "ok": Expected("Processed", [], set(), DONE, 1),
    # Both quick attempts of the first run fail; the Supervisor's one retry succeeds.
    "retry": Expected("Processed", [("retry", "ship", 1)], set(), DONE, 2),
    # Fails every time: two Supervisor retries, then the task is undone.
    "spent": Expected(
        "Compensated",
        [("retry", "ship", 1), ("retry", "ship", 2), ("compensate", "ship", 3)],
        {"failure_threshold"},
        UNDONE,
        3,
    ),
    # The service said no: undone at once.
    "permanent": Expected("Compensated", [("compensate", "ship", 1)], {"permanent_failure"}, UNDONE, 1),
}


@dataclass
class Batch:
    rig: Rig
    expected: dict[str, Expected] = field(default_factory=dict)
    handles: dict[str, Any] = field(default_factory=dict)


async def add_faults(rig: Rig, kind: str, task_id: str) -> None:
    if kind == "retry":
        await rig.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    elif kind == "spent":
        await rig.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=task_id)
    elif kind == "permanent":
        await rig.add_fault(
            endpoint="shipping.ship", kind="permanent", status=422, error="address_rejected", match_order_id=task_id
        )


async def submit_batch(
    rig: Rig, prefix: str, kinds: dict[str, int], task_ids: dict[str, list[str]] | None = None
) -> Batch:
    """Submit ``kinds[k]`` orders of each kind (ids from ``task_ids`` if given)."""
    batch = Batch(rig)
    for kind, n in kinds.items():
        ids = (task_ids or {}).get(kind) or [fresh_id(f"{prefix}-{kind}") for _ in range(n)]
        for task_id in ids:
            await add_faults(rig, kind, task_id)
            batch.expected[task_id] = KINDS[kind]
    for task_id in batch.expected:
        batch.handles[task_id] = await rig.submit(task_id)
    return batch


async def check_batch(batch: Batch, timeout: float = 90.0) -> list[Any]:
    """Every order ends where its faults put it, with exactly its decisions, alerts and
    ledger effects, and the outbox is empty. Returns every decision row of the batch."""
    rig = batch.rig
    for task_id, expected in batch.expected.items():
        result: TaskResult = await asyncio.wait_for(batch.handles[task_id].result(), timeout)
        assert result.state == expected.state, (task_id, result.state, expected.state)

    async def all_decisions() -> list[Any]:
        rows: list[Any] = []
        for task_id in batch.expected:
            rows += await rig.decisions(task_id)
        return rows

    # The outbox drains: every recorded decision was carried out (or is a note).
    rows = await wait_until(
        all_decisions, lambda ds: all(d.signal_sent_at is not None for d in ds), timeout=30, what="outbox drained"
    )
    keys = Counter((d.task_id, d.step, d.failure_count, d.kind) for d in rows)
    assert [k for k, n in keys.items() if n > 1] == [], keys

    problems: list[tuple[str, str, Any, Any]] = []
    for task_id, expected in batch.expected.items():
        decided = [(d.kind, d.step, d.failure_count) for d in rows if d.task_id == task_id and d.kind != "wait"]
        if decided != expected.decisions:
            problems.append((task_id, "decisions", decided, expected.decisions))

        alerts = await rig.alerts(task_id)
        per_incident = Counter((a.step, a.kind) for a in alerts)
        if any(n > 1 for n in per_incident.values()) or {a.kind for a in alerts} != expected.alert_kinds:
            problems.append((task_id, "alerts", sorted(per_incident.items()), expected.alert_kinds))

        actions = Counter(e["action"] for e in await rig.ledger(task_id))
        seen = {action: actions[action] for action in expected.ledger}
        if seen != expected.ledger:
            problems.append((task_id, "ledger", seen, expected.ledger))

        # Each retry decision re-ran the step exactly once, each compensate started one undo.
        status: TaskStatus = await batch.handles[task_id].query("status", result_type=TaskStatus)
        ship = next(s for s in status.steps if s.name == "ship")
        retries = sum(" ship: retry by supervisor" in e for e in status.events)
        compensations = sum(" compensate requested by supervisor" in e for e in status.events)
        want_retries = sum(k == "retry" for k, _, _ in expected.decisions)
        want_compensations = sum(k == "compensate" for k, _, _ in expected.decisions)
        if (ship.runs, retries, compensations) != (expected.ship_runs, want_retries, want_compensations):
            problems.append(
                (
                    task_id,
                    "runs/retries/compensations",
                    (ship.runs, retries, compensations),
                    (expected.ship_runs, want_retries, want_compensations),
                )
            )
    assert problems == [], problems
    return rows
