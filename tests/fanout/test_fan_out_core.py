"""A fan-out's pure rules: items keyed by their own key (never their position), the bounds of a
declaration, batches and concurrency, the tolerance, the undo order, the counts shown."""

from __future__ import annotations

import pytest

from bench._payroll import PAY, REPORT, PayrollInput
from sas.api import ForEach, TaskDefinition, Tolerance
from sas.task_models.fanout import FanOutItem, ItemOutcome
from sas.task_types.checks import definition_problem
from sas.task_types.groups import Parallel
from sas.workflows.core.fanout import FanOutTally, batches, concurrency, keyed_items


def test_items_are_keyed_by_their_own_key_whatever_their_order() -> None:
    first = keyed_items([{"id": "a", "n": 1}, {"id": "b", "n": 2}], lambda item: item["id"])
    again = keyed_items([{"id": "b", "n": 2}, {"id": "a", "n": 1}], lambda item: item["id"])
    assert not isinstance(first, str) and not isinstance(again, str)
    assert {i.key: i.item for i in first} == {i.key: i.item for i in again}


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([{"id": "a"}, {"id": "a"}], "key 'a' is given to two items"),
        ([{"id": "a"}, "b"], "item 1 is a str, not an object"),
        ([{"id": "a b"}], "item 0: item key 'a b'"),
        ([{"id": "x" * 29}], "1-28 characters"),
        ([{"name": "a"}], "item 0: its key could not be read: KeyError"),
        ({"id": "a"}, "the items are a dict, not a list"),
    ],
)
def test_items_that_cannot_be_fanned_out_are_said_why(items: object, problem: str) -> None:
    found = keyed_items(items, lambda item: item["id"])
    assert isinstance(found, str) and problem in found


def test_batches_and_concurrency_never_exceed_the_bound() -> None:
    items = [FanOutItem(key=f"k{i}", item={}) for i in range(1000)]
    cut = batches(items, 150)
    assert [len(b) for b in cut] == [150] * 6 + [100]
    assert [i.key for b in cut for i in b] == [i.key for i in items]
    assert concurrency(20, 100) == (20, 1)
    assert concurrency(300, 100) == (100, 3)
    assert concurrency(250, 100) == (100, 2)  # 200 at once: never more than the bound


@pytest.mark.parametrize(
    ("tolerance", "items", "allowed"),
    [(Tolerance(), 50, 0), (Tolerance(count=3), 50, 3), (Tolerance(percent=10), 55, 5), (Tolerance(3, 10), 100, 3)],
)
def test_the_tolerance_is_the_smaller_bound(tolerance: Tolerance, items: int, allowed: int) -> None:
    assert tolerance.allowed(items) == allowed


def test_the_tally_counts_by_state_and_undoes_latest_first() -> None:
    tally = FanOutTally(total=5, tolerance=Tolerance(count=1))
    tally.begin([FanOutItem(key=k, item={}) for k in ("a", "b", "c")])
    assert tally.counts() == {"items": 5, "tolerated": 1, "processing": 3, "not_started": 2}
    tally.take(
        [
            ItemOutcome(key="a", state="processed"),
            ItemOutcome(key="b", state="failed", error="no", error_type="Rejected"),
            ItemOutcome(key="c", state="processed"),
        ]
    )
    assert not tally.past_tolerance()
    assert tally.to_undo() == ["c", "b", "a"]
    assert tally.to_undo(["b"]) == ["b"]
    tally.take([ItemOutcome(key="b", state="compensated")])
    assert tally.counts() == {"items": 5, "tolerated": 1, "processed": 2, "compensated": 1, "not_started": 2}
    assert tally.describe() == "5 items: 2 processed, 1 compensated, 2 not started (1 may fail)"
    tally.take([ItemOutcome(key=k, state="failed", error="no", error_type="Rejected") for k in ("a", "c")])
    assert tally.past_tolerance()


def test_a_fan_out_is_checked_when_its_type_loads() -> None:
    assert definition_problem(TaskDefinition("pay_ok", PayrollInput, (PAY, REPORT))) is None
    grouped = TaskDefinition("pay_grouped", PayrollInput, (Parallel(PAY, REPORT),))
    assert "cannot be in a parallel group" in (definition_problem(grouped) or "")
    pivot = TaskDefinition("pay_pivot", PayrollInput, (PAY, REPORT), pivot="pay")
    assert "cannot be the pivot" in (definition_problem(pivot) or "")
    after = TaskDefinition("pay_after", PayrollInput, (REPORT, PAY), pivot="report")
    assert "or come after it" in (definition_problem(after) or "")
    wide = ForEach("pay", PAY.forward, PAY.undo, items=PAY.items, key=PAY.key, max_concurrency=5000)
    assert "max_concurrency 5000" in (definition_problem(TaskDefinition("pay_wide", PayrollInput, (wide,))) or "")
    bare = ForEach("pay", PAY.forward, items=PAY.items, key=PAY.key)
    assert "has no undo" in (definition_problem(TaskDefinition("pay_bare", PayrollInput, (bare,))) or "")


def test_a_batch_workflow_runs_the_agents_of_fan_out_steps_only() -> None:
    from bench._payroll import PayrollRunWorkflow
    from sas.runtime.activity_owners import owners_of

    owners = owners_of([PayrollRunWorkflow])
    assert owners.refusal("payroll.pay", "FanOutBatch") is None
    assert owners.refusal("payroll.refund", "FanOutBatch") is None
    assert owners.refusal("payroll.report", "FanOutBatch") == "task type FanOutBatch declares no such step"
