"""A fan-out step's result names its counts for what they count: ``tolerance`` the items that may
fail, ``failed_items`` those that did; ``tolerated`` (the tolerance under its first name) stays, so
a result written before, which has it alone, is read alike."""

from __future__ import annotations

from sas.task_models.fanout import describe_counts, named_counts, tolerance_of, with_ended

# A result as written before the counts were named (`tolerated` is the limit, not a count).
BEFORE = {"items": 30, "tolerated": 3, "processed": 28, "compensated": 2}


def test_the_tolerance_and_the_failed_items_are_named_beside_the_old_field() -> None:
    named = named_counts(BEFORE, failed_items=2)
    assert named == {**BEFORE, "tolerance": 3, "failed_items": 2}
    assert list(named)[:3] == ["items", "tolerance", "failed_items"]


def test_a_result_written_before_is_read_as_one_written_now() -> None:
    assert tolerance_of(BEFORE) == tolerance_of(named_counts(BEFORE, failed_items=2)) == 3
    assert tolerance_of({"items": 1, "tolerance": 0, "tolerated": 0}) == 0
    assert describe_counts(BEFORE) == "30 items: 28 processed, 2 compensated (3 may fail)"
    assert describe_counts(named_counts(BEFORE, failed_items=2)) == describe_counts(BEFORE)


def test_a_running_fan_out_s_counts_keep_their_named_fields_old_or_new() -> None:
    running = {"items": 4, "tolerated": 1, "processing": 2}
    assert with_ended(running, {"processed": 1}) == {"items": 4, "tolerated": 1, "processing": 1, "processed": 1}
    named = named_counts(running, failed_items=0)
    assert with_ended(named, {"failed": 1}) == {
        "items": 4,
        "tolerance": 1,
        "failed_items": 0,
        "tolerated": 1,
        "processing": 1,
        "failed": 1,
    }
