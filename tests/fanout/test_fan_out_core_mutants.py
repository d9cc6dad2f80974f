"""A fan-out's pure rules (``workflows/core/fanout.py``), pinned whole: why a list cannot be fanned
out, word for word; its complete-by (``attempts_s``, ``run_s``, ``tolerated_undo_s``) computed by
hand for shapes where each term counts; the tally at its tolerance's edge (the cases ``python -m
bench.mutation fanout`` found no test held; docs/testing.md, "Mutation testing"). Pure, no server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sas.task_models.fanout import FanOutItem, ItemOutcome
from sas.task_models.plans import StepPolicyValues
from sas.task_types.fan_out import Tolerance, item_key_problem
from sas.workflows.core.fanout import FanOutTally, attempts_s, concurrency, keyed_items, run_s, tolerated_undo_s

# 4 attempts of 7 s; quick retries 1 s, 3 s, then 9 s capped at 5 s: 28 + 9 = 37 s.
POLICY = StepPolicyValues(complete_by_s=7, max_attempts=4, initial_interval_s=1, backoff=3, max_interval_s=5)
ATTEMPTS = 37.0


def by_id(item: Mapping[str, Any]) -> str:
    return str(item["id"])


# ---------------------------------------------------------------- keyed items


def test_items_are_kept_in_order_each_with_its_key_and_a_copy_of_itself() -> None:
    given = ({"id": "a", "n": 1}, {"id": "b", "n": 2})
    assert keyed_items(given, by_id) == [
        FanOutItem(key="a", item={"id": "a", "n": 1}),
        FanOutItem(key="b", item={"id": "b", "n": 2}),
    ]
    assert keyed_items([], by_id) == []


def test_a_list_that_cannot_be_fanned_out_is_said_why_word_for_word() -> None:
    assert keyed_items({"id": "a"}, by_id) == "the items are a dict, not a list"
    assert keyed_items("ab", by_id) == "the items are a str, not a list"
    assert keyed_items(b"ab", by_id) == "the items are a bytes, not a list"
    assert keyed_items([{"id": "a"}, ["b"]], by_id) == "item 1 is a list, not an object"
    assert keyed_items([{"id": "a"}, {"name": "b"}], by_id) == "item 1: its key could not be read: KeyError: 'id'"
    assert keyed_items([{"id": "a b"}], by_id) == f"item 0: {item_key_problem('a b')}"
    assert keyed_items([{"id": "a"}, {"id": "b"}, {"id": "a"}], by_id) == (
        "item 2: key 'a' is given to two items; each item's key must be its own"
    )


# ---------------------------------------------------------------- how long a fan-out may run


def test_one_items_attempts_are_each_attempt_and_the_capped_waits_between_them() -> None:
    assert attempts_s(POLICY) == ATTEMPTS
    assert attempts_s(POLICY.model_copy(update={"max_attempts": 1})) == 7  # no retry, no wait
    assert attempts_s(POLICY.model_copy(update={"max_attempts": 2})) == 7 * 2 + 1


def test_items_run_wave_after_wave_of_batches_round_after_round_within_a_batch() -> None:
    assert run_s(POLICY, 0, 20, 100) == 0.0
    assert run_s(POLICY, -150, 100, 100) == 0.0  # no count below nothing runs for any time
    assert run_s(POLICY, 1, 20, 100) == ATTEMPTS
    # 30 items in one batch, 20 at once: 2 rounds.
    assert run_s(POLICY, 30, 20, 100) == 2 * ATTEMPTS
    # 250 items: 3 batches of 100, one at a time (40 at once), each 3 rounds: 9.
    assert run_s(POLICY, 250, 40, 100) == 9 * ATTEMPTS
    # 1000 items: 10 batches, 2 at once (250 // 100), each one round: 5 waves.
    assert run_s(POLICY, 1000, 250, 100) == 5 * ATTEMPTS
    # 1001 items: an 11th batch is a 6th wave.
    assert run_s(POLICY, 1001, 250, 100) == 6 * ATTEMPTS


def test_the_tolerated_undo_is_its_rounds_of_the_allowed_items_two_four_seconds_apart() -> None:
    assert tolerated_undo_s(POLICY, 0, 2, 100, 3) == 0.0
    assert tolerated_undo_s(POLICY, 1, 2, 100, 1) == ATTEMPTS
    # 5 items, 2 at once: 3 rounds of attempts per try; 3 tries, 2 s and 4 s apart.
    assert tolerated_undo_s(POLICY, 5, 2, 100, 3) == 3 * 3 * ATTEMPTS + 2 + 4
    assert tolerated_undo_s(POLICY, 5, 2, 100, 4) == 4 * 3 * ATTEMPTS + 2 + 4 + 8  # doubling, not adding


def test_batches_at_once_never_exceed_the_bound_and_are_at_least_one() -> None:
    assert concurrency(20, 100) == (20, 1)
    assert concurrency(100, 100) == (100, 1)
    assert concurrency(199, 100) == (100, 1)
    assert concurrency(200, 100) == (100, 2)


# ---------------------------------------------------------------- the tally


def items(*keys: str) -> list[FanOutItem]:
    return [FanOutItem(key=k, item={}) for k in keys]


def test_an_item_never_called_is_forgotten_with_its_error() -> None:
    tally = FanOutTally(total=3, tolerance=Tolerance(count=1))
    tally.begin(items("a", "b"))
    tally.take([ItemOutcome(key="a", state="failed", error="no", error_type="Rejected")])
    assert tally.errors == {"a": "Rejected: no"}
    tally.take(
        [
            ItemOutcome(key="a", state="not_started"),
            ItemOutcome(key="c", state="not_started"),  # never begun: nothing to forget
            ItemOutcome(key="b", state="processed"),  # the outcomes after it are taken too
        ]
    )
    assert tally.states == {"b": "processed"} and tally.errors == {}
    assert tally.counts() == {"items": 3, "tolerated": 1, "processed": 1, "not_started": 2}


def test_an_item_that_ends_well_after_a_failure_loses_its_error() -> None:
    tally = FanOutTally(total=1, tolerance=Tolerance())
    tally.take([ItemOutcome(key="a", state="failed", error="no", error_type="Rejected")])
    tally.take([ItemOutcome(key="a", state="processed")])
    assert tally.states == {"a": "processed"} and tally.errors == {}


def test_the_tolerance_holds_up_to_its_bound_and_no_further() -> None:
    tally = FanOutTally(total=10, tolerance=Tolerance(count=2))
    tally.begin(items("a", "b", "c"))
    tally.take([ItemOutcome(key=k, state="failed", error="no", error_type="Rejected") for k in ("a", "b")])
    assert tally.allowed == 2 and tally.failed() == ["a", "b"] and not tally.past_tolerance()
    tally.take([ItemOutcome(key="c", state="failed", error="no", error_type="Rejected")])
    assert tally.past_tolerance()
    assert tally.count("failed") == 3 and tally.count("processed") == 0


def test_the_undo_takes_the_latest_attempted_first_and_skips_the_undone() -> None:
    tally = FanOutTally(total=4, tolerance=Tolerance())
    tally.begin(items("a", "b", "c", "d"))
    tally.take([ItemOutcome(key="b", state="compensated"), ItemOutcome(key="c", state="compensation_failed")])
    assert tally.to_undo() == ["d", "c", "a"]
    assert tally.to_undo(["a", "b", "c"]) == ["c", "a"]
    assert tally.to_undo([]) == []


def test_the_counts_follow_the_states_order_and_the_note_says_them() -> None:
    tally = FanOutTally(total=6, tolerance=Tolerance(count=1))
    tally.begin(items("a", "b", "c", "d", "e"))
    tally.take(
        [
            ItemOutcome(key="a", state="compensation_failed", error="down", error_type="Transient"),
            ItemOutcome(key="b", state="compensated"),
            ItemOutcome(key="c", state="failed", error="no", error_type="Rejected"),
            ItemOutcome(key="d", state="processed"),
        ]
    )
    counts = tally.counts()
    assert counts == {
        "items": 6,
        "tolerated": 1,
        "processing": 1,
        "processed": 1,
        "failed": 1,
        "compensated": 1,
        "compensation_failed": 1,
        "not_started": 1,
    }
    assert list(counts) == [
        "items",
        "tolerated",
        "processing",
        "processed",
        "failed",
        "compensated",
        "compensation_failed",
        "not_started",
    ]
    assert tally.describe() == (
        "6 items: 1 processing, 1 processed, 1 failed, 1 compensated, 1 compensation failed, 1 not started (1 may fail)"
    )


def test_the_first_errors_are_three_unless_told() -> None:
    tally = FanOutTally(total=4, tolerance=Tolerance())
    tally.take([ItemOutcome(key=k, state="failed", error="no", error_type="Rejected") for k in "abcd"])
    assert tally.first_errors() == "a: Rejected: no; b: Rejected: no; c: Rejected: no"
    assert tally.first_errors(1) == "a: Rejected: no"
