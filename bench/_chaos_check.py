"""The chaos run's invariants, computed from what the state store, the services' ledger
and Temporal say at the end. Pure functions over plain data, so each rule is easy to read
(and to test); ``bench/chaos.py`` gathers the data.

- lost:         an order that is neither terminal (Processed / Compensated) nor parked as
                Error with an open alert for it.
- duplicates:   an idempotency key with more than one effect in the ledger.
- inconsistent: a Processed task without the effect of each of its Processed steps, with an
                effect of a step it did not run (a Skipped one), or with an undo; a task
                Processed though its approval was rejected or never given.
- left_behind:  under a Compensated task, a forward effect with no undo pointing at it
                (target_key), or a step undone whose forward key its service has not voided
                (a forward call still on its way could then still take effect).
- mismatched:   an order whose mirror (tasks/steps rows) disagrees with Temporal's final word.

The ledgers of both kinds of service (the demo services of the orders, the chaos trip's own)
have one shape: ``service``, ``action``, ``order_id`` (the task id), ``idempotency_key`` and,
for an undo, ``target_key``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

TERMINAL = ("Processed", "Compensated")
# Each forward action of the ledgers, the undo that undoes it, and the step that performs it.
UNDO_OF = {
    "reserve": "release",
    "charge": "refund",
    "ship": "cancel",
    "book_flight": "cancel_flight",
    "book_hotel": "cancel_hotel",
    "cover": "uncover",
    "open": "close",
    "deliver": "recall",
    "file": "unfile",
}
STEP_OF = {
    "reserve": "reserve",
    "charge": "charge",
    "ship": "ship",
    "book_flight": "flight",
    "book_hotel": "hotel",
    "cover": "insure",
    "open": "open",
    "deliver": "deliver",
    "file": "file",
}
ACTIVE_ALERT = ("open", "acked")


@dataclass
class MirrorTask:
    state: str
    steps: dict[str, str]  # step name -> state
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # step name -> its result, if any


@dataclass
class TemporalView:
    """What Temporal says about one order.

    status: the Scheduler workflow's execution status name (COMPLETED, RUNNING, TERMINATED, ...).
    state: the task state it reports (its result when completed, its status query while running).
    steps: step name -> state in that result/query.
    cleanup: status name of ``cleanup-<id>`` if one exists (looked for when the workflow was
        closed from outside, and for a child task, which its parent may undo once completed).
    cleanup_steps: the clean-up workflow's result (step -> state) when it completed.
    """

    status: str
    state: str | None = None
    steps: dict[str, str] = field(default_factory=dict)
    cleanup: str | None = None
    cleanup_steps: dict[str, str] = field(default_factory=dict)


def parked(task: MirrorTask | None) -> bool:
    return task is not None and task.state == "Error" and "Error" in task.steps.values()


def settled(task: MirrorTask | None) -> bool:
    """Where an order stops moving without an operator: terminal, or parked."""
    return task is not None and (task.state in TERMINAL or parked(task))


def lost(orders: list[str], mirror: dict[str, MirrorTask], alerts: dict[str, list[tuple[str, str]]]) -> list[str]:
    problems = []
    for order in orders:
        task = mirror.get(order)
        if task is None:
            problems.append(f"{order}: no task row in the state store")
        elif task.state in TERMINAL:
            continue
        elif task.state == "Error":
            if not any(status in ACTIVE_ALERT for status, _kind in alerts.get(order, [])):
                problems.append(f"{order}: parked as Error without an open alert")
        else:
            problems.append(f"{order}: not settled ({task.state}; steps {task.steps})")
    return problems


def duplicates(ledger: list[dict[str, Any]]) -> list[str]:
    counts = Counter((e["service"], e["idempotency_key"]) for e in ledger)
    return [f"{key} has {n} effects" for (_service, key), n in sorted(counts.items()) if n > 1]


def _by_order(ledger: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_order: dict[str, list[dict[str, Any]]] = {}
    for entry in ledger:
        by_order.setdefault(entry["order_id"], []).append(entry)
    return by_order


def inconsistent(
    orders: list[str],
    mirror: dict[str, MirrorTask],
    ledger: list[dict[str, Any]],
    approvals: dict[str, str] | None = None,
) -> list[str]:
    """``approvals``: task id -> ``approved``, ``rejected`` or ``silent``, as the driver answered."""
    by_order = _by_order(ledger)
    problems = []
    for order in orders:
        task = mirror.get(order)
        if task is None or task.state != "Processed":
            continue
        entries = by_order.get(order, [])
        done = {e["action"] for e in entries if e["action"] in UNDO_OF}
        ran = {action for action, step in STEP_OF.items() if task.steps.get(step) == "Processed"}
        missing = ran - done
        if missing:
            problems.append(f"{order}: processed but no {', '.join(sorted(missing))} in the ledger")
        for action in sorted(done - ran):
            problems.append(
                f"{order}: processed yet {action} in the ledger for step {STEP_OF[action]} ({task.steps.get(STEP_OF[action])})"
            )
        undone = sorted(e["action"] for e in entries if e["action"] not in UNDO_OF)
        if undone:
            problems.append(f"{order}: processed yet {', '.join(undone)} in the ledger")
        verdict = (approvals or {}).get(order)
        if verdict in ("rejected", "silent"):
            problems.append(f"{order}: processed though its approval was {verdict}")
    return problems


def left_behind(
    orders: list[str], mirror: dict[str, MirrorTask], ledger: list[dict[str, Any]], voided: set[str] | None = None
) -> list[str]:
    """Effects a Compensated task leaves behind. ``voided``: the forward keys the services have
    voided; when given, every step undone (Compensated) must have its forward key among them."""
    by_order = _by_order(ledger)
    problems = []
    for order in orders:
        task = mirror.get(order)
        if task is None or task.state != "Compensated":
            continue
        entries = by_order.get(order, [])
        undone = {(e["action"], e["target_key"]) for e in entries if e["action"] not in UNDO_OF}
        for e in entries:
            if e["action"] in UNDO_OF and (UNDO_OF[e["action"]], e["idempotency_key"]) not in undone:
                problems.append(f"{order}: compensated but {e['action']} {e['idempotency_key']} was never undone")
        if voided is not None:
            for step, state in sorted(task.steps.items()):
                if state == "Compensated" and step in STEP_OF.values() and f"{order}:{step}" not in voided:
                    problems.append(f"{order}: step {step} undone but its key {order}:{step} is not voided")
    return problems


def mismatched(orders: list[str], mirror: dict[str, MirrorTask], temporal: dict[str, TemporalView]) -> list[str]:
    problems = []
    for order in orders:
        task, view = mirror.get(order), temporal.get(order)
        if task is None or view is None:
            problems.append(f"{order}: mirror={task and task.state} temporal={view and view.status}")
            continue
        if view.status == "COMPLETED" and view.cleanup is not None:
            # A child task completed, then undone by the clean-up its parent started.
            if view.cleanup != "COMPLETED" or task.state != "Compensated":
                problems.append(f"{order}: workflow completed, clean-up {view.cleanup}, mirror says {task.state}")
        elif view.status == "COMPLETED":
            if task.state not in TERMINAL or view.state != task.state:
                problems.append(f"{order}: workflow completed as {view.state}, mirror says {task.state}")
            elif view.steps != task.steps:
                problems.append(f"{order}: steps differ: workflow {view.steps}, mirror {task.steps}")
        elif view.status == "RUNNING":
            if not (task.state == "Error" and view.state == "Error"):
                problems.append(f"{order}: workflow running ({view.state}), mirror says {task.state}")
            elif view.steps != task.steps:
                problems.append(f"{order}: steps differ: workflow {view.steps}, mirror {task.steps}")
        else:  # closed from outside: the Supervisor's clean-up workflow undoes it
            if view.cleanup == "COMPLETED":
                if task.state != "Compensated":
                    problems.append(f"{order}: workflow {view.status}, cleaned up, but mirror says {task.state}")
            elif view.cleanup == "RUNNING":
                if not parked(task):
                    problems.append(f"{order}: workflow {view.status}, clean-up running, mirror says {task.state}")
            else:
                problems.append(f"{order}: workflow {view.status}, clean-up {view.cleanup}, mirror says {task.state}")
    return problems
