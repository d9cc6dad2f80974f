"""The chaos run's rules for its fan-outs and child tasks (bench/_chaos_shape_check.py, and the
rules every task meets, bench/_chaos_check.py, over a child) on data made here: a good end
passes, and each bad end is caught by the rule that names it. The short chaos run trusts them;
this shows they can fail."""

from __future__ import annotations

from typing import Any

from bench._chaos_check import MirrorTask, TemporalView, duplicates, inconsistent, left_behind, mismatched
from bench._chaos_shape_check import (
    children,
    fan_out_inconsistent,
    fan_out_left_behind,
    parent_inconsistent,
    parent_left_behind,
    split_items,
)

FAN = "f"
ITEMS = ("r-0", "r-1", "r-2", "refuse-3")


def pay(task: str, item: str) -> dict[str, Any]:
    key = f"{task}:pay:{item}"
    return {"service": "chaos_wages", "action": "pay", "order_id": task, "idempotency_key": key, "target_key": None}


def refund(task: str, item: str) -> dict[str, Any]:
    key = f"{task}:pay:{item}"
    return {
        "service": "chaos_wages",
        "action": "refund",
        "order_id": task,
        "idempotency_key": f"{key}:undo",
        "target_key": key,
    }


def call(task: str, action: str, step: str, service: str = "chaos_filing") -> dict[str, Any]:
    return {
        "service": service,
        "action": action,
        "order_id": task,
        "idempotency_key": f"{task}:{step}",
        "target_key": None,
    }


def undo(task: str, action: str, step: str, service: str = "chaos_filing") -> dict[str, Any]:
    key = f"{task}:{step}"
    return {"service": service, "action": action, "order_id": task, "idempotency_key": f"{key}:undo", "target_key": key}


def processed_fan_out(processed: int = 3) -> MirrorTask:
    counts = {"items": 4, "tolerated": 2, "processed": processed, "compensated": 4 - processed}
    return MirrorTask("Processed", {"pay": "Processed", "file": "Processed"}, {"pay": counts})


def good_fan_out() -> tuple[dict[str, MirrorTask], list[dict[str, Any]], set[str]]:
    """Three paid; the refused one tolerated (its undo's lookup found nothing and voided it)."""
    ledger = [pay(FAN, i) for i in ITEMS[:3]] + [call(FAN, "file", "file")]
    return {FAN: processed_fan_out()}, ledger, {f"{FAN}:pay:refuse-3"}


def fan_rules(mirror: dict[str, MirrorTask], ledger: list[dict[str, Any]], voided: set[str]) -> dict[str, list[str]]:
    items, steps = split_items(ledger)
    found = {
        "duplicates": duplicates(ledger),
        "inconsistent": inconsistent([FAN], mirror, steps) + fan_out_inconsistent({FAN: 4}, mirror, items, 2),
        "left_behind": left_behind([FAN], mirror, steps, voided) + fan_out_left_behind({FAN: 4}, mirror, items, voided),
    }
    return {name: problems for name, problems in found.items() if problems}


def test_a_fan_out_within_its_tolerance_passes() -> None:
    mirror, ledger, voided = good_fan_out()
    assert fan_rules(mirror, ledger, voided) == {}
    # A tolerated item that was paid, then refunded, is no undo of the task.
    mirror[FAN] = processed_fan_out(2)
    ledger += [refund(FAN, "r-2")]
    assert fan_rules(mirror, ledger, voided | {f"{FAN}:pay:r-2"}) == {}


def test_an_item_paid_twice_under_its_key_is_a_duplicate() -> None:
    mirror, ledger, voided = good_fan_out()
    ledger.append(pay(FAN, "r-1"))
    assert fan_rules(mirror, ledger, voided) == {"duplicates": [f"{FAN}:pay:r-1 has 2 effects"]}


def test_a_processed_fan_out_missing_payments_beyond_its_tolerance_or_its_counts_is_inconsistent() -> None:
    mirror, ledger, voided = good_fan_out()
    ledger.remove(pay(FAN, "r-2"))
    assert fan_rules(mirror, ledger, voided) == {
        "inconsistent": [f"{FAN}: its step says 3 items processed, 2 paid in the ledger"]
    }
    ledger.remove(pay(FAN, "r-1"))
    assert fan_rules(mirror, ledger, voided) == {
        "inconsistent": [
            f"{FAN}: processed with 1 of 4 items paid, 2 may fail",
            f"{FAN}: its step says 3 items processed, 1 paid in the ledger",
        ]
    }
    # A step without its counts cannot be checked, and says so.
    mirror, ledger, voided = good_fan_out()
    mirror[FAN].results.clear()
    assert fan_rules(mirror, ledger, voided) == {"inconsistent": [f"{FAN}: processed but its pay step has no counts"]}


def test_a_payment_standing_under_an_undone_item_or_an_undone_fan_out_is_left_behind() -> None:
    mirror, ledger, voided = good_fan_out()
    # The step says two were processed (one undone), yet three payments stand, one of them voided.
    mirror[FAN] = processed_fan_out(2)
    assert fan_rules(mirror, ledger, voided | {f"{FAN}:pay:r-2"}) == {
        "left_behind": [
            f"{FAN}: its step says 2 items processed, 3 payments stand",
            f"{FAN}: item {FAN}:pay:r-2 undone but its payment stands",
        ]
    }
    # The whole fan-out undone: every payment must be refunded.
    mirror[FAN] = MirrorTask("Compensated", {"pay": "Compensated", "file": "Failed"})
    ledger = [pay(FAN, i) for i in ITEMS[:3]] + [refund(FAN, "r-0"), refund(FAN, "r-2")]
    assert fan_rules(mirror, ledger, voided) == {
        "left_behind": [f"{FAN}: compensated but payment {FAN}:pay:r-1 was never refunded"]
    }
    ledger.append(refund(FAN, "r-1"))
    assert fan_rules(mirror, ledger, voided) == {}


PARENT, CHILD = "p", "p:child"


def family(parent: str, child: str | None, deliver: str = "Processed") -> dict[str, MirrorTask]:
    steps = {"open": "Processed" if parent == "Processed" else "Compensated", "child": parent, "file": parent}
    mirror = {PARENT: MirrorTask(parent, steps)}
    if child is not None:
        mirror[CHILD] = MirrorTask(child, {"deliver": deliver})
    return mirror


def test_a_parent_holds_its_child_to_its_own_end() -> None:
    assert parent_inconsistent([PARENT], family("Processed", "Processed"), "child") == []
    assert parent_inconsistent([PARENT], family("Processed", "Compensated"), "child") == [
        f"{PARENT}: processed but its child is Compensated"
    ]
    assert parent_inconsistent([PARENT], family("Processed", None), "child") == [
        f"{PARENT}: processed but its child is None"
    ]
    assert parent_left_behind([PARENT], family("Compensated", "Compensated", "Compensated"), "child") == []
    assert parent_left_behind([PARENT], family("Compensated", "Processed"), "child") == [
        f"{PARENT}: compensated but its child {CHILD} stands (Processed)"
    ]
    # A parent whose child step ran names its child, found in the mirror or not; one that never
    # reached it does not.
    assert children([PARENT], family("Processed", None), "child") == [CHILD]
    never = {PARENT: MirrorTask("Compensated", {"open": "Compensated", "child": "Skipped", "file": "Skipped"})}
    assert children([PARENT], never, "child") == []


def test_a_child_undone_by_its_parent_leaves_nothing_behind_and_matches_temporal() -> None:
    mirror = family("Compensated", "Compensated", "Compensated")
    ledger = [call(CHILD, "deliver", "deliver", "chaos_courier")]
    voided = {f"{CHILD}:deliver"}
    assert left_behind([CHILD], mirror, ledger, voided) == [
        f"{CHILD}: compensated but deliver {CHILD}:deliver was never undone"
    ]
    ledger.append(undo(CHILD, "recall", "deliver", "chaos_courier"))
    assert left_behind([CHILD], mirror, ledger, voided) == []
    # Temporal: the child completed (Processed), then its clean-up, started by the parent, undid it.
    done = TemporalView("COMPLETED", "Processed", {"deliver": "Processed"}, cleanup="COMPLETED")
    assert mismatched([CHILD], mirror, {CHILD: done}) == []
    mirror[CHILD].state = "Processed"
    assert mismatched([CHILD], mirror, {CHILD: done}) == [
        f"{CHILD}: workflow completed, clean-up COMPLETED, mirror says Processed"
    ]
