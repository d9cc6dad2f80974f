"""A fan-out step (``ForEach``): one call for each item of a list, each item under its own key, with
a bound on how many may fail (``Tolerance``)."""

from __future__ import annotations

import re
from collections import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sas.task_types.steps import StepContext, StepDefinition

MAX_ITEM_KEY = 28
"""An item's key is part of its idempotency key, ``<task>#<n>:<step>:<item>:undo``, which the
services take up to 200 characters: 171 for the step's own (``sas/task_models/ids.py``), one for
the colon, 28 for the item."""
_ITEM_KEY = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ITEM_KEY - 1}}}")


def item_key_problem(key: object) -> str | None:
    """Why ``key`` cannot be an item's key; None if it can."""
    if not isinstance(key, str) or not _ITEM_KEY.fullmatch(key):
        return (
            f"item key {key!r}: use 1-{MAX_ITEM_KEY} characters from A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )
    return None


@dataclass(frozen=True)
class Tolerance:
    """How many of a fan-out's items may fail, as a count, a percentage of the items, or both (the
    smaller bound holds). Within it, the failed items are undone and the task goes on; past it,
    the whole task is undone. ``Tolerance()``: none may fail."""

    count: int | None = None
    percent: float | None = None

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 0:
            raise ValueError("Tolerance(count=...): 0 or more")
        if self.percent is not None and not 0 <= self.percent <= 100:
            raise ValueError("Tolerance(percent=...): 0 to 100")

    def allowed(self, items: int) -> int:
        """How many of ``items`` may fail."""
        bounds = [self.count] if self.count is not None else []
        if self.percent is not None:
            bounds.append(int(items * self.percent / 100))
        return min(bounds, default=0)

    def describe(self) -> str:
        parts = [
            f"{self.count}" if self.count is not None else "",
            f"{self.percent:g}%" if self.percent is not None else "",
        ]
        return " and ".join(p for p in parts if p) or "0"


@dataclass(frozen=True, kw_only=True)
class ForEach(StepDefinition):
    """A step run once for each item of a list: ``forward`` (and ``undo``) are called per item,
    with the item as their input (``Input("amount")`` reads the item's field) under the
    idempotency key ``<task>:<step>:<item key>``.

    ```python
    ForEach(
        "pay",
        items=lambda ctx: ctx.input["recipients"],
        key=lambda item: item["id"],
        forward=PAYROLL.post("/payroll/pay", body={"to": Input("id"), "cents": Input("cents")}, result=Paid),
        undo=PAYROLL.post("/payroll/refund", body={"payment_id": Forward("payment_id")}, result=Refunded),
        max_concurrency=20,
        tolerate=Tolerance(percent=5),
    )
    ```

    Attributes:
        items: The list, from the input and the earlier steps' results; deterministic, like a
            condition (it runs in the workflow). Each item a JSON object.
        key: Each item's own stable key (1-28 characters from A-Z a-z 0-9 . _ -), unique in the
            list: never its position, which can change when the task is resubmitted.
        max_concurrency: How many items are called at once, at most.
        tolerate: How many items may fail after their quick retries (or for good): within it,
            they are undone and the task goes on; past it, the task is undone, every item too.
        batch_size: Items per batch; each batch runs in a child workflow of its own, so that no
            history holds more than one batch's calls.

    The step's result is the count of its items by state; ``sas show`` and the UI give those
    counts, not a row per item.
    """

    items: Callable[[StepContext], abc.Sequence[Mapping[str, Any]]]
    key: Callable[[Mapping[str, Any]], str]
    max_concurrency: int = 20
    tolerate: Tolerance = field(default_factory=Tolerance)
    batch_size: int = 100
