"""What the UI says of an order: its one line (the item and the amount, in its own currency) and
its story so far (the services' ids of what was done). Plain functions of the input and the
results: the workflow runs them on every change of the task, and again on replay."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sas.api import StepContext


def amount(order: Mapping[str, Any]) -> str:
    cents = order["amount_cents"]
    return f"{cents // 100}.{cents % 100:02d} {order['currency']}"


def order_line(order: Mapping[str, Any]) -> str:
    """``2 × BOOK-1 · 25.98 EUR``"""
    return f"{order['quantity']} × {order['sku']} · {amount(order)}"


def order_story(ctx: StepContext) -> str:
    """A line for each step done: ``Charged 25.98 EUR: ch_…``."""
    done = {
        "reserve": lambda r: f"Reserved {ctx.input['quantity']} × {ctx.input['sku']}: {r['reservation_id']}",
        "charge": lambda r: f"Charged {amount(ctx.input)}: {r['charge_id']}",
        "ship": lambda r: f"Shipped to the customer's address: {r['shipment_id']}",
    }
    lines = [tell(ctx.results[step]) for step, tell in done.items() if step in ctx.results]
    return "\n".join(lines) or "Nothing done yet."
