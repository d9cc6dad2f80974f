"""What the UI says of a payout: its one line (how many are paid, and how much in all) and its
story so far. Plain functions of the input and the results: the workflow runs them on every
change of the task, and again on replay, so no clock, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sas.api import StepContext


def amount(cents: int, currency: str) -> str:
    """``123400, "EUR"`` -> ``1,234.00 EUR``, in whole cents (no float ever rounds a payout)."""
    return f"{cents // 100:,}.{cents % 100:02d} {currency}"


def payout_line(payout: Mapping[str, Any]) -> str:
    """``payout 12 recipients, 1,234.00 EUR``"""
    recipients = payout["recipients"]
    total = sum(int(r["amount_cents"]) for r in recipients)
    who = "recipient" if len(recipients) == 1 else "recipients"
    return f"payout {len(recipients)} {who}, {amount(total, payout['currency'])}"


def payout_story(ctx: StepContext) -> str:
    """A line for each step done: ``Paid 10 of 12 recipients; 2 refused (up to 2 may be).``"""
    lines = []
    run = ctx.results.get("validate")
    if run:
        lines.append(f"Run {run['run_id']} validated: {amount(run['total_cents'], ctx.input['currency'])}.")
    paid = ctx.results.get("pay")
    if paid:
        refused = paid.get("compensated", 0)
        lines.append(
            f"Paid {paid['processed']} of {paid['items']} recipients; {refused} refused (up to {paid['tolerated']} may be)."
        )
    notice = ctx.results.get("notice")
    if notice:
        lines.append(f"Notices sent by {ctx.input['channel']}: child task {notice['child_task_id']}.")
    return "\n".join(lines) or "Nothing done yet."
