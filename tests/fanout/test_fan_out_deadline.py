"""A fan-out step's complete-by, from its policy: wave after wave of batches, in each batch
``per_batch`` items at once, each item every attempt to its complete-by and the quick retries'
waits between; then the undo of the failures it tolerates (workflows/core/fanout.py)."""

from __future__ import annotations

import pytest

from sas.task_models import StepPolicyValues
from sas.workflows.core.fanout import attempts_s, run_s, tolerated_undo_s

POLICY = StepPolicyValues(complete_by_s=10, max_attempts=3, initial_interval_s=1, backoff=2, max_interval_s=1.5)


def test_one_item_runs_every_attempt_and_the_waits_between() -> None:
    assert attempts_s(POLICY) == 3 * 10 + 1 + 1.5  # the second wait is capped at max_interval_s


@pytest.mark.parametrize(
    ("items", "max_concurrency", "batch_size", "rounds"),
    [
        (0, 8, 10, 0),
        (1, 8, 10, 1),
        (10, 8, 10, 2),  # one batch of 10, 8 at once: two rounds
        (30, 8, 10, 6),  # three batches one after the other
        (30, 20, 10, 2),  # two batches at once: two waves, one round each
        (1000, 20, 100, 50),  # 10 batches, one at a time, 5 rounds each
    ],
)
def test_a_fan_out_runs_as_many_rounds_as_its_waves_and_batches_need(
    items: int, max_concurrency: int, batch_size: int, rounds: int
) -> None:
    assert run_s(POLICY, items, max_concurrency, batch_size) == rounds * attempts_s(POLICY)


def test_the_tolerated_undo_is_tried_three_times_two_and_four_seconds_apart() -> None:
    undo = StepPolicyValues(complete_by_s=1, max_attempts=1)
    assert tolerated_undo_s(undo, 3, 8, 10, 3) == 3 * 1 + 2 + 4
    assert tolerated_undo_s(undo, 0, 8, 10, 3) == 0


def test_the_payroll_of_docs_task_types_has_the_complete_by_it_says() -> None:
    pay = StepPolicyValues(complete_by_s=10, max_attempts=3, initial_interval_s=0.2, max_interval_s=1)
    forward = run_s(pay, 30, 8, 10)
    undo = tolerated_undo_s(StepPolicyValues(), 3, 8, 10, 3)
    assert (round(forward, 1), round(undo, 1), round(forward + undo)) == (
        183.6,
        100.5,
        284,
    )  # 3 x 2 x 30.6, 3 x 31.5 + 6
