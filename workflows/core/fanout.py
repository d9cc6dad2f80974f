"""A fan-out's rules, pure like the rest of the core: its items keyed and checked, cut into
batches, how many batches run at once, each item's state, the tolerance, and what to undo in
which order. The shell (``workflows/shell/fanout.py``) runs the batches as child workflows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from sas.task_models.fanout import ITEM_STATES, FanOutItem, ItemOutcome, ItemState, describe_counts
from sas.task_models.plans import StepPolicyValues
from sas.task_types.fan_out import Tolerance, item_key_problem


def keyed_items(
    items: Sequence[Mapping[str, Any]] | Any, key: Callable[[Mapping[str, Any]], str]
) -> list[FanOutItem] | str:
    """Each item with its key; or why the list cannot be fanned out (an item that is not an
    object, a key that cannot be one, two items with one key)."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        return f"the items are a {type(items).__name__}, not a list"
    keyed: list[FanOutItem] = []
    seen: set[str] = set()
    for position, item in enumerate(items):
        if not isinstance(item, Mapping):
            return f"item {position} is a {type(item).__name__}, not an object"
        try:
            item_key = key(item)
        except Exception as err:  # noqa: BLE001 - a team's function over its own data: said, not raised
            return f"item {position}: its key could not be read: {type(err).__name__}: {err}"
        problem = item_key_problem(item_key)
        if problem:
            return f"item {position}: {problem}"
        if item_key in seen:
            return f"item {position}: key {item_key!r} is given to two items; each item's key must be its own"
        seen.add(item_key)
        keyed.append(FanOutItem(key=item_key, item=dict(item)))
    return keyed


def batches(items: Sequence[FanOutItem], size: int) -> list[list[FanOutItem]]:
    return [list(items[start : start + size]) for start in range(0, len(items), size)]


def concurrency(max_concurrency: int, batch_size: int) -> tuple[int, int]:
    """(items at once in one batch, batches at once): together never more than ``max_concurrency``."""
    per_batch = min(max_concurrency, batch_size)
    return per_batch, max(1, max_concurrency // per_batch)


def attempts_s(policy: StepPolicyValues) -> float:
    """The longest one item's call may run: every attempt to its complete-by, and the quick
    retries' waits between them (Temporal's retry policy, ``agents.retry_policy``)."""
    waits = sum(
        min(policy.initial_interval_s * policy.backoff**k, policy.max_interval_s)
        for k in range(policy.max_attempts - 1)
    )
    return policy.max_attempts * policy.complete_by_s + waits


def run_s(policy: StepPolicyValues, items: int, max_concurrency: int, batch_size: int) -> float:
    """The longest ``items`` items may run as a fan-out runs them: wave after wave of batches,
    in each batch ``per_batch`` items at once, each item its ``attempts_s``. A fan-out step's
    complete-by (and its undo's) is this much after it is written."""
    if items <= 0:
        return 0.0
    per_batch, at_once = concurrency(max_concurrency, batch_size)
    waves = ceil(ceil(items / batch_size) / at_once)
    rounds = ceil(min(items, batch_size) / per_batch)
    return waves * rounds * attempts_s(policy)


def tolerated_undo_s(
    policy: StepPolicyValues, allowed: int, max_concurrency: int, batch_size: int, rounds: int
) -> float:
    """The longest the undo of the failed items a fan-out tolerates may run while the task goes
    on: ``rounds`` tries of at most ``allowed`` items, 2 s, 4 s... apart."""
    if allowed <= 0:
        return 0.0
    return rounds * run_s(policy, allowed, max_concurrency, batch_size) + sum(2**r for r in range(1, rounds))


@dataclass
class FanOutTally:
    """Every item's state, in the order the items were attempted (batch by batch)."""

    total: int
    tolerance: Tolerance
    states: dict[str, ItemState] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def begin(self, items: Sequence[FanOutItem]) -> None:
        """A batch has begun: its items are attempted from now on, and undone if the task is."""
        self.take([ItemOutcome(key=i.key, state="processing") for i in items])

    def take(self, outcomes: Sequence[ItemOutcome]) -> None:
        for outcome in outcomes:
            if outcome.state == "not_started":
                # Never called: not attempted after all, so never undone.
                self.states.pop(outcome.key, None)
                self.errors.pop(outcome.key, None)
                continue
            self.states[outcome.key] = outcome.state
            if outcome.error:
                self.errors[outcome.key] = f"{outcome.error_type}: {outcome.error}"
            else:
                self.errors.pop(outcome.key, None)

    @property
    def allowed(self) -> int:
        return self.tolerance.allowed(self.total)

    def count(self, state: ItemState) -> int:
        return sum(1 for s in self.states.values() if s == state)

    def failed(self) -> list[str]:
        return [k for k, s in self.states.items() if s == "failed"]

    def past_tolerance(self) -> bool:
        return len(self.failed()) > self.allowed

    def to_undo(self, keys: Sequence[str] | None = None) -> list[str]:
        """The attempted items not undone yet (of ``keys``, if given), latest first."""
        wanted = self.states.keys() if keys is None else keys
        return [k for k in reversed(list(self.states)) if k in wanted and self.states[k] != "compensated"]

    def counts(self) -> dict[str, int]:
        """The step's result: how many items, how many may fail, and how many are in each state."""
        shown = {"items": self.total, "tolerated": self.allowed}
        shown |= {state: n for state in ITEM_STATES if (n := self.count(state))}
        left = self.total - len(self.states)
        if left:
            shown["not_started"] = left
        return shown

    def describe(self) -> str:
        """One line for the step's note: ``40 items: 37 processed, 3 compensated (3 tolerated)``."""
        return describe_counts(self.counts())

    def first_errors(self, limit: int = 3) -> str:
        return "; ".join(f"{k}: {e}" for k, e in list(self.errors.items())[:limit])
