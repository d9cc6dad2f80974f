"""The chaos run's invariants for its fan-outs and child tasks (bench/_chaos_shapes.py), beside
the rules every task meets (bench/_chaos_check.py). Pure functions over plain data, as those.

A fan-out's items are the ledger's ``pay`` and ``refund`` entries, one key per item
(``<task>:pay:<item>``), kept out of the per-step rules (a tolerated item's refund is no undo of
the task): ``split_items`` parts them. The per-step rules still cover the fan-out's ``file``, the
parent's ``open`` and ``file`` and the child's ``deliver`` (the child is a task of its own,
``<parent>:child``, in the mirror and in Temporal).

- inconsistent: a Processed fan-out whose payments standing fall short of its items by more than
  its tolerance, or of the items its step says were processed; a Processed parent whose child
  is not Processed.
- left_behind:  a payment standing under a Compensated fan-out; under a Processed one, more
  payments standing than its step says were processed, or one standing whose key was voided
  (its item undone, or looked up as nothing); a Compensated parent whose child still stands.
"""

from __future__ import annotations

from typing import Any

from bench._chaos_check import MirrorTask

ITEM_FORWARD, ITEM_UNDO = "pay", "refund"
ITEM_ACTIONS = (ITEM_FORWARD, ITEM_UNDO)
FAN_OUT_STEP = "pay"


def split_items(ledger: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the fan-out's item entries, every other entry)."""
    items = [e for e in ledger if e["action"] in ITEM_ACTIONS]
    return items, [e for e in ledger if e["action"] not in ITEM_ACTIONS]


def standing(task: str, items: list[dict[str, Any]]) -> list[str]:
    """The keys of ``task``'s payments with no refund pointing at them, in ledger order, each once
    (a second payment under a key is a duplicate, counted as such)."""
    mine = [e for e in items if e["order_id"] == task]
    refunded = {e["target_key"] for e in mine if e["action"] == ITEM_UNDO}
    paid = dict.fromkeys(e["idempotency_key"] for e in mine if e["action"] == ITEM_FORWARD)
    return [key for key in paid if key not in refunded]


def processed_items(task: MirrorTask) -> int | None:
    """How many items the fan-out step's result says were processed (None: no result)."""
    counts = task.results.get(FAN_OUT_STEP)
    if counts is None or "items" not in counts:
        return None
    return int(counts.get("processed", 0))


def fan_out_inconsistent(
    fan_outs: dict[str, int], mirror: dict[str, MirrorTask], items: list[dict[str, Any]], tolerated: int
) -> list[str]:
    """``fan_outs``: task id -> how many items its input has."""
    problems = []
    for task_id, total in fan_outs.items():
        task = mirror.get(task_id)
        if task is None or task.state != "Processed":
            continue
        paid = len(standing(task_id, items))
        if total - paid > tolerated:
            problems.append(f"{task_id}: processed with {paid} of {total} items paid, {tolerated} may fail")
        said = processed_items(task)
        if said is None:
            problems.append(f"{task_id}: processed but its {FAN_OUT_STEP} step has no counts")
        elif paid < said:
            problems.append(f"{task_id}: its step says {said} items processed, {paid} paid in the ledger")
    return problems


def fan_out_left_behind(
    fan_outs: dict[str, int], mirror: dict[str, MirrorTask], items: list[dict[str, Any]], voided: set[str]
) -> list[str]:
    """``voided``: the forward keys the services have voided (by an undo, or a lookup's nothing)."""
    problems = []
    for task_id in fan_outs:
        task = mirror.get(task_id)
        if task is None or task.state not in ("Processed", "Compensated"):
            continue
        left = standing(task_id, items)
        if task.state == "Compensated":
            problems += [f"{task_id}: compensated but payment {key} was never refunded" for key in left]
            continue
        said = processed_items(task)
        if said is not None and len(left) > said:
            problems.append(f"{task_id}: its step says {said} items processed, {len(left)} payments stand")
        problems += [f"{task_id}: item {key} undone but its payment stands" for key in left if key in voided]
    return problems


def child_of(parent: str, step: str) -> str:
    """The child task's id (``sas.workflows.core.children.child_task_id``, first incarnation)."""
    return f"{parent}:{step}"


def children(parents: list[str], mirror: dict[str, MirrorTask], step: str) -> list[str]:
    """The child tasks the parents started: those in the mirror, and those a parent's step says
    it started (which must then be there too)."""
    started = []
    for parent in parents:
        child, task = child_of(parent, step), mirror.get(parent)
        ran = task is not None and task.steps.get(step, "Pending") not in ("Pending", "Skipped")
        if child in mirror or ran:
            started.append(child)
    return started


def parent_inconsistent(parents: list[str], mirror: dict[str, MirrorTask], step: str) -> list[str]:
    problems = []
    for parent in parents:
        task, child = mirror.get(parent), mirror.get(child_of(parent, step))
        if task is not None and task.state == "Processed" and (child is None or child.state != "Processed"):
            problems.append(f"{parent}: processed but its child is {child and child.state}")
    return problems


def parent_left_behind(parents: list[str], mirror: dict[str, MirrorTask], step: str) -> list[str]:
    problems = []
    for parent in parents:
        task, child = mirror.get(parent), mirror.get(child_of(parent, step))
        if task is not None and task.state == "Compensated" and child is not None and child.state == "Processed":
            problems.append(f"{parent}: compensated but its child {child_of(parent, step)} stands (Processed)")
    return problems
