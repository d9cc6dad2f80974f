"""The order example's demo, which ``sas demo`` runs: orders that each carry a fault, and the
fault decides where the order must end. Named in this package's ``pyproject.toml``, in the
``sas.demos`` entry point group; nothing in sas names it.
"""

from __future__ import annotations

from typing import Any

from sas.api import DemoCase, DemoPlan

# The demo services' ledger: each forward action and the action that undoes it.
UNDO_ACTIONS = {"reserve": "release", "charge": "refund", "ship": "cancel"}

# Each case's ``input`` holds only what it changes in an order; ``plan`` adds the rest.
CASES: tuple[DemoCase, ...] = (
    DemoCase(name="clean", expected="Processed", what="no fault"),
    DemoCase(
        name="flaky-payment",
        expected="Processed",
        faults=({"endpoint": "payment.charge", "kind": "transient", "times": 2},),
        what="payment answers 503 twice; the Agent's quick retries absorb it",
    ),
    DemoCase(
        name="card-declined",
        expected="Compensated",
        input={"card": "4000000000000002"},
        what="card declined (permanent): reservation released",
    ),
    DemoCase(
        name="shipping-hangs",
        expected="Compensated",
        faults=({"endpoint": "shipping.ship", "kind": "hang", "hang_s": 600},),
        what="shipping hangs past complete-by: Supervisor retry, cool-down, then undo",
    ),
    DemoCase(
        name="terminated",
        expected="Compensated",
        faults=({"endpoint": "shipping.ship", "kind": "latency", "latency_ms": 5000},),
        terminate_during="ship",
        what="workflow terminated mid-saga; the Supervisor undoes it from the state store",
    ),
    DemoCase(
        name="long-outage",
        expected="Processed",
        faults=({"endpoint": "shipping.ship", "kind": "transient", "times": 6},),
        what="shipping down for a while: a Supervisor retry, then a cool-down, then it works",
    ),
    DemoCase(
        name="out-of-stock",
        expected="Compensated",
        input={"sku": "OUT-OF-STOCK"},
        what="no stock (permanent): nothing to undo",
    ),
    DemoCase(
        name="lost-response",
        expected="Processed",
        faults=({"endpoint": "inventory.reserve", "kind": "lost_response", "times": 1},),
        what="reservation made but its answer lost; the retry replays it under the same key",
    ),
    DemoCase(
        name="refund-down",
        expected="Error",
        faults=(
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
        name="slow-shipping",
        expected="Processed",
        faults=({"endpoint": "shipping.ship", "kind": "latency", "latency_ms": 1500},),
        what="shipping is slow but within complete-by",
    ),
    DemoCase(name="clean-2", expected="Processed", what="no fault"),
    DemoCase(name="clean-3", expected="Processed", what="no fault"),
)


def order_input(index: int) -> dict[str, Any]:
    """The ``index``-th demo order, before its case changes it: a few customers, books and quantities."""
    return {
        "customer_id": f"demo-customer-{index % 7}",
        "sku": f"BOOK-{index % 5}",
        "quantity": 1 + index % 3,
        "amount_cents": 999 + 100 * index,
        "address": f"{index} Demo Street",
    }


def plan(count: int) -> DemoPlan:
    """``count`` orders, the cases in turn, each with its own input."""
    cases = tuple(
        case.model_copy(update={"input": {**order_input(index), **case.input}})
        for index, case in enumerate(CASES[i % len(CASES)] for i in range(count))
    )
    return DemoPlan(task_type="order", cases=cases, undo_actions=UNDO_ACTIONS, noun="orders")
