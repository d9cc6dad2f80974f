"""The chaos run's checker (bench/_chaos_check.py) on data made here: a good end passes every rule,
and each kind of bad end is caught by the rule that names it, and by it alone. The short chaos
run (test_chaos_short.py) trusts these rules; this shows they can fail."""

from __future__ import annotations

from typing import Any

from bench._chaos_check import (
    MirrorTask,
    TemporalView,
    duplicates,
    inconsistent,
    left_behind,
    lost,
    mismatched,
    settled,
)

PROCESSED_STEPS = {"reserve": "Processed", "charge": "Processed", "ship": "Processed"}
COMPENSATED_STEPS = {"reserve": "Compensated", "charge": "Compensated", "ship": "Skipped"}
PARKED_STEPS = {"reserve": "Processed", "charge": "Error", "ship": "Pending"}


def effect(order: str, action: str, target: str | None = None, key: str | None = None) -> dict[str, Any]:
    service = {
        "reserve": "inventory",
        "release": "inventory",
        "charge": "payment",
        "refund": "payment",
        "book_flight": "chaos_air",
        "cancel_flight": "chaos_air",
        "book_hotel": "chaos_hotel",
        "cancel_hotel": "chaos_hotel",
        "cover": "chaos_insurer",
        "uncover": "chaos_insurer",
    }.get(action, "shipping")
    return {
        "service": service,
        "action": action,
        "order_id": order,
        "idempotency_key": key or f"{order}:{action}",
        "target_key": target,
    }


def good_end() -> tuple[list[str], dict[str, MirrorTask], list[dict[str, Any]], dict[str, TemporalView], dict]:
    """o-done completed; o-undone compensated after its charge; o-parked waits for an operator."""
    orders = ["o-done", "o-undone", "o-parked"]
    mirror = {
        "o-done": MirrorTask("Processed", dict(PROCESSED_STEPS)),
        "o-undone": MirrorTask("Compensated", dict(COMPENSATED_STEPS)),
        "o-parked": MirrorTask("Error", dict(PARKED_STEPS)),
    }
    ledger = [
        effect("o-done", "reserve"),
        effect("o-done", "charge"),
        effect("o-done", "ship"),
        effect("o-undone", "reserve"),
        effect("o-undone", "charge"),
        effect("o-undone", "refund", target="o-undone:charge"),
        effect("o-undone", "release", target="o-undone:reserve"),
        effect("o-parked", "reserve"),
    ]
    temporal = {
        "o-done": TemporalView("COMPLETED", "Processed", dict(PROCESSED_STEPS)),
        "o-undone": TemporalView("COMPLETED", "Compensated", dict(COMPENSATED_STEPS)),
        "o-parked": TemporalView("RUNNING", "Error", dict(PARKED_STEPS)),
    }
    alerts = {"o-parked": [("open", "parked")]}
    return orders, mirror, ledger, temporal, alerts


def all_rules(orders, mirror, ledger, temporal, alerts) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    return {
        "lost": lost(orders, mirror, alerts),
        "duplicates": duplicates(ledger),
        "inconsistent": inconsistent(orders, mirror, ledger),
        "mismatched": mismatched(orders, mirror, temporal),
        "left_behind": left_behind(orders, mirror, ledger),
    }


def broken(rules: dict[str, list[str]]) -> dict[str, list[str]]:
    return {name: problems for name, problems in rules.items() if problems}


def test_a_good_end_passes_every_rule() -> None:
    orders, mirror, ledger, temporal, alerts = good_end()
    assert broken(all_rules(orders, mirror, ledger, temporal, alerts)) == {}
    assert all(settled(mirror[o]) for o in orders)


def test_an_order_left_running_or_parked_without_an_alert_or_missing_is_lost() -> None:
    orders, mirror, _ledger, _temporal, alerts = good_end()
    mirror["o-done"] = MirrorTask("Processing", {"reserve": "Processed", "charge": "Processing", "ship": "Pending"})
    alerts["o-parked"] = [("resolved", "parked")]  # nobody is told about the parked order any more
    problems = lost(orders, mirror, alerts)
    assert problems == [
        "o-done: not settled (Processing; steps {'reserve': 'Processed', 'charge': 'Processing', 'ship': 'Pending'})",
        "o-parked: parked as Error without an open alert",
    ]
    assert not settled(mirror["o-done"])
    assert lost([*orders, "o-ghost"], mirror, {"o-parked": [("acked", "parked")]}) == [
        problems[0],
        "o-ghost: no task row in the state store",
    ]


def test_two_effects_under_one_key_are_duplicates_and_only_they() -> None:
    orders, mirror, ledger, temporal, alerts = good_end()
    ledger.append(effect("o-done", "charge"))  # charged twice under the same key
    assert broken(all_rules(orders, mirror, ledger, temporal, alerts)) == {
        "duplicates": ["o-done:charge has 2 effects"]
    }
    # The same key at two services is two effects, not a duplicate.
    assert duplicates([effect("o", "charge", key="k"), effect("o", "ship", key="k")]) == []


def test_a_compensated_order_with_an_effect_not_undone_leaves_it_behind() -> None:
    orders, mirror, ledger, temporal, alerts = good_end()
    ledger.remove(effect("o-undone", "refund", target="o-undone:charge"))
    assert broken(all_rules(orders, mirror, ledger, temporal, alerts)) == {
        "left_behind": ["o-undone: compensated but charge o-undone:charge was never undone"]
    }
    # An undo that points at another key does not count as undoing this one.
    ledger.append(effect("o-undone", "refund", target="o-undone:something-else"))
    assert left_behind(orders, mirror, ledger) == ["o-undone: compensated but charge o-undone:charge was never undone"]


def test_a_step_undone_whose_key_its_service_did_not_void_is_left_behind() -> None:
    """A forward call still on its way could land after the task was Compensated."""
    orders, mirror, ledger, _temporal, _alerts = good_end()
    assert left_behind(orders, mirror, ledger, voided={"o-undone:reserve", "o-undone:charge"}) == []
    assert left_behind(orders, mirror, ledger, voided={"o-undone:reserve"}) == [
        "o-undone: step charge undone but its key o-undone:charge is not voided"
    ]


TRIP_DONE = {
    "flight": "Processed",
    "hotel": "Processed",
    "approval": "Processed",
    "settle": "Processed",
    "charge": "Processed",
    "insure": "Skipped",
}


def trip_ledger(trip: str) -> list[dict[str, Any]]:
    return [
        effect(trip, "book_flight", key=f"{trip}:flight"),
        effect(trip, "book_hotel", key=f"{trip}:hotel"),
        effect(trip, "charge"),
    ]


def test_a_processed_trip_with_an_effect_of_its_skipped_step_or_a_refused_approval_is_inconsistent() -> None:
    mirror = {"t": MirrorTask("Processed", dict(TRIP_DONE))}
    ledger = trip_ledger("t")
    assert inconsistent(["t"], mirror, ledger, {"t": "approved"}) == []
    # The insure step was Skipped (its When was false), yet the insurer covered the trip.
    assert inconsistent(["t"], mirror, [*ledger, effect("t", "cover", key="t:insure")]) == [
        "t: processed yet cover in the ledger for step insure (Skipped)"
    ]
    # Insured, but no cover in the insurer's ledger.
    insured = {"t": MirrorTask("Processed", {**TRIP_DONE, "insure": "Processed"})}
    assert inconsistent(["t"], insured, ledger) == ["t: processed but no cover in the ledger"]
    assert inconsistent(["t"], mirror, ledger, {"t": "rejected"}) == ["t: processed though its approval was rejected"]
    assert inconsistent(["t"], mirror, ledger, {"t": "silent"}) == ["t: processed though its approval was silent"]


def test_a_trip_undone_with_both_siblings_cancelled_leaves_nothing_behind() -> None:
    steps = dict.fromkeys(("flight", "hotel"), "Compensated") | {"approval": "Skipped", "charge": "Skipped"}
    mirror = {"t": MirrorTask("Compensated", steps)}
    ledger = [
        effect("t", "book_flight", key="t:flight"),
        effect("t", "book_hotel", key="t:hotel"),
        effect("t", "cancel_flight", target="t:flight", key="t:flight:undo"),
    ]
    voided = {"t:flight", "t:hotel"}
    assert left_behind(["t"], mirror, ledger, voided) == ["t: compensated but book_hotel t:hotel was never undone"]
    ledger.append(effect("t", "cancel_hotel", target="t:hotel", key="t:hotel:undo"))
    assert left_behind(["t"], mirror, ledger, voided) == []


def test_a_processed_order_missing_an_effect_or_with_an_undo_is_inconsistent() -> None:
    orders, mirror, ledger, _temporal, _alerts = good_end()
    ledger.remove(effect("o-done", "ship"))
    ledger.append(effect("o-done", "release", target="o-done:reserve"))
    assert inconsistent(orders, mirror, ledger) == [
        "o-done: processed but no ship in the ledger",
        "o-done: processed yet release in the ledger",
    ]


def test_a_mirror_that_disagrees_with_temporal_is_mismatched() -> None:
    orders, mirror, ledger, temporal, alerts = good_end()
    temporal["o-done"] = TemporalView("COMPLETED", "Compensated", dict(COMPENSATED_STEPS))
    temporal["o-undone"] = TemporalView(
        "COMPLETED", "Compensated", {"reserve": "Compensated", "charge": "Compensated", "ship": "Compensated"}
    )
    temporal["o-parked"] = TemporalView("RUNNING", "Compensating", dict(PARKED_STEPS))
    assert broken(all_rules(orders, mirror, ledger, temporal, alerts)) == {
        "mismatched": [
            "o-done: workflow completed as Compensated, mirror says Processed",
            "o-undone: steps differ: workflow {'reserve': 'Compensated', 'charge': 'Compensated', 'ship': "
            "'Compensated'}, mirror {'reserve': 'Compensated', 'charge': 'Compensated', 'ship': 'Skipped'}",
            "o-parked: workflow running (Compensating), mirror says Error",
        ]
    }


def test_a_workflow_closed_from_outside_must_be_cleaned_up() -> None:
    orders, mirror, _ledger, temporal, _alerts = good_end()
    # Terminated, and the clean-up finished: the mirror must say Compensated.
    temporal["o-undone"] = TemporalView("TERMINATED", cleanup="COMPLETED")
    assert mismatched(orders, mirror, temporal) == []
    mirror["o-undone"] = MirrorTask("Processing", dict(COMPENSATED_STEPS))
    assert mismatched(orders, mirror, temporal) == [
        "o-undone: workflow TERMINATED, cleaned up, but mirror says Processing"
    ]
    # Terminated with no clean-up at all, or a clean-up running while the mirror is not parked.
    temporal["o-undone"] = TemporalView("TERMINATED")
    assert mismatched(orders, mirror, temporal) == [
        "o-undone: workflow TERMINATED, clean-up None, mirror says Processing"
    ]
    temporal["o-undone"] = TemporalView("TERMINATED", cleanup="RUNNING")
    assert mismatched(orders, mirror, temporal) == [
        "o-undone: workflow TERMINATED, clean-up running, mirror says Processing"
    ]
    # An order Temporal does not know, or the mirror does not know.
    del temporal["o-done"]
    assert mismatched(["o-done"], mirror, temporal) == ["o-done: mirror=Processed temporal=None"]
