"""policy.decide past a task type's pivot (its point of no return): the ladder's outcome is to
park, never to compensate, except for the pivot refused for good (proof it did nothing)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sas.supervisor.decide.policy import decide
from tests.supervisor.test_policy import LADDER, POLICY, T0, failed


@pytest.mark.parametrize(
    ("pivot", "permanent", "kind"),
    [
        (None, False, "compensate"),
        (None, True, "compensate"),
        ("pivot", True, "compensate"),  # refused for good: the steps before it are undone
        ("pivot", False, "park"),  # a timeout or a 5xx: it may have charged
        ("forward_only", False, "park"),
        ("forward_only", True, "park"),  # refused for good after the pivot: it cannot undo
    ],
)
def test_past_the_pivot_a_spent_ladder_or_a_refusal_parks(pivot: str | None, permanent: bool, kind: str) -> None:
    count = 0 if permanent else 4  # a refusal skips the ladder; else the ladder is spent at 5
    d = decide(failed(count, LADDER, pivot=pivot, permanent=permanent), POLICY, T0)
    assert d.kind == kind
    if kind == "park" and pivot is not None:
        assert "past the point of no return, never undone" in d.reason
        assert d.alert is not None and "--force --reason" in d.alert.suggested_action


def test_past_the_pivot_the_ladder_still_retries_first() -> None:
    d = decide(failed(0, LADDER, pivot="forward_only"), POLICY, T0 + timedelta(seconds=10))
    assert d.kind == "retry" and d.failure_count == 1


def test_a_step_past_the_pivot_overrunning_is_never_compensated() -> None:
    before = decide(failed(4, LADDER, state="Processing"), POLICY, T0)
    assert before.kind == "compensate"
    past = decide(failed(4, LADDER, state="Processing", pivot="pivot"), POLICY, T0)
    assert past.kind == "retry" and "CompleteBy extended" in past.reason  # a running step cannot be parked
