"""The demo's orders: each carries a fault, and the fault decides where the order must end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DemoCase:
    name: str
    expected: str  # task state the order must reach
    faults: tuple[dict[str, Any], ...] = ()
    changes: dict[str, Any] = field(default_factory=dict)
    what: str = ""
    terminate: bool = False  # the demo terminates the workflow mid-saga, as an operator might from the UI


CASES: tuple[DemoCase, ...] = (
    DemoCase("clean", "Processed", what="no fault"),
    DemoCase(
        "flaky-payment",
        "Processed",
        ({"endpoint": "payment.charge", "kind": "transient", "times": 2},),
        what="payment answers 503 twice; the Agent's quick retries absorb it",
    ),
    DemoCase(
        "card-declined",
        "Compensated",
        changes={"card": "4000000000000002"},
        what="card declined (permanent): reservation released",
    ),
    DemoCase(
        "shipping-hangs",
        "Compensated",
        ({"endpoint": "shipping.ship", "kind": "hang", "hang_s": 600},),
        what="shipping hangs past complete-by: Supervisor retry, cool-down, then undo",
    ),
    DemoCase(
        "terminated",
        "Compensated",
        ({"endpoint": "shipping.ship", "kind": "latency", "latency_ms": 5000},),
        terminate=True,
        what="workflow terminated mid-saga; the Supervisor undoes it from the state store",
    ),
    DemoCase(
        "long-outage",
        "Processed",
        ({"endpoint": "shipping.ship", "kind": "transient", "times": 6},),
        what="shipping down for a while: a Supervisor retry, then a cool-down, then it works",
    ),
    DemoCase(
        "out-of-stock", "Compensated", changes={"sku": "OUT-OF-STOCK"}, what="no stock (permanent): nothing to undo"
    ),
    DemoCase(
        "lost-response",
        "Processed",
        ({"endpoint": "inventory.reserve", "kind": "lost_response", "times": 1},),
        what="reservation made but its answer lost; the retry replays it under the same key",
    ),
    DemoCase(
        "refund-down",
        "Error",
        (
            {
                "endpoint": "shipping.ship",
                "kind": "permanent",
                "status": 422,
                "error": "address_rejected",
                "message": "address rejected",
            },
            {"endpoint": "payment.refund", "kind": "transient", "status": 503},
        ),
        what="shipping rejects and the refund keeps failing: parked for an operator",
    ),
    DemoCase(
        "slow-shipping",
        "Processed",
        ({"endpoint": "shipping.ship", "kind": "latency", "latency_ms": 1500},),
        what="shipping is slow but within complete-by",
    ),
    DemoCase("clean-2", "Processed", what="no fault"),
    DemoCase("clean-3", "Processed", what="no fault"),
)


def demo_cases(count: int) -> list[DemoCase]:
    return [CASES[i % len(CASES)] for i in range(count)]


def base_order(index: int) -> dict[str, Any]:
    return {
        "customer_id": f"demo-customer-{index % 7}",
        "sku": f"BOOK-{index % 5}",
        "quantity": 1 + index % 3,
        "amount_cents": 999 + 100 * index,
        "address": f"{index} Demo Street",
    }


# Quick enough to watch: seconds where production would use minutes or hours.
DEMO_ENV = {
    "SAS_DEFAULT_STEP__COMPLETE_BY_S": "3",
    "SAS_DEFAULT_STEP__MAX_ATTEMPTS": "3",
    "SAS_DEFAULT_STEP__INITIAL_INTERVAL_S": "0.3",
    "SAS_DEFAULT_STEP__MAX_INTERVAL_S": "1",
    "SAS_COMPENSATION__COMPLETE_BY_S": "3",
    "SAS_COMPENSATION__MAX_ATTEMPTS": "3",
    "SAS_COMPENSATION__INITIAL_INTERVAL_S": "0.3",
    "SAS_COMPENSATION__MAX_INTERVAL_S": "1",
    "SAS_SUPERVISOR__INTERVAL_S": "1",
    "SAS_SUPERVISOR__OVERDUE_GRACE_S": "2",
    "SAS_SUPERVISOR__FAILURE_THRESHOLD": "3",
    "SAS_SUPERVISOR__MAX_INTERVAL_S": "2",
    # The ladder: one quick Supervisor retry, then one try after a cool-down (hours in production).
    "SAS_SUPERVISOR__RETRIES": "1",
    "SAS_SUPERVISOR__RETRY_DELAY_S": "0.5",
    "SAS_SUPERVISOR__COOLDOWN_S": "4",
    "SAS_SUPERVISOR__COOLDOWN_TRIES": "1",
    # Notice a terminated workflow within seconds.
    "SAS_SUPERVISOR__ORPHAN_AFTER_S": "3",
    "SAS_SUPERVISOR__ORPHAN_CHECK_S": "2",
    "SAS_SUPERVISOR__QUEUE_CHECK_S": "5",
}


def check_ledger(expected: str, entries: list[dict[str, Any]]) -> list[str]:
    """What is wrong with one order's ledger given where it ended; empty if consistent."""
    problems = []
    keys = [e["idempotency_key"] for e in entries]
    if len(keys) != len(set(keys)):
        problems.append("duplicate effect for one idempotency key")
    done = {e["action"]: e for e in entries}
    undo_of = {"reserve": "release", "charge": "refund", "ship": "cancel"}
    if expected == "Processed":
        missing = [a for a in undo_of if a not in done]
        if missing:
            problems.append(f"completed but no {', '.join(missing)} in the ledger")
        if any(u in done for u in undo_of.values()):
            problems.append("completed yet something was undone")
    elif expected == "Compensated":
        for forward, undo in undo_of.items():
            if forward in done and undo not in done:
                problems.append(f"compensated but {forward} was never {undo}d")
    return problems
