"""The pure rules of a child step (``workflows/core/children.py``), pinned whole: the child's id at
the edge of a task id's length, each end's outcome word for word, the note its parent's step shows
(the cases ``python -m bench.mutation children`` found no test held; docs/testing.md, "Mutation
testing"). Pure, no server."""

from __future__ import annotations

import hashlib

from sas.task_models import TaskState
from sas.task_models.ids import MAX_TASK_ID
from sas.workflows.core.children import (
    CHILD_COMPENSATED,
    CHILD_FAILED,
    ChildOutcome,
    child_task_id,
    outcome_of,
    waiting_note,
)


def test_a_childs_id_names_a_later_incarnation_only() -> None:
    assert child_task_id("g-1", "order", incarnation=1) == "g-1:order"
    assert child_task_id("g-1", "order", incarnation=2) == "g-1:order.2"


def test_a_childs_id_that_fits_exactly_is_kept_whole() -> None:
    parent = "p" * (MAX_TASK_ID - len(":ship"))
    assert child_task_id(parent, "ship") == parent + ":ship"


def test_a_childs_id_one_too_long_keeps_the_parents_start_and_a_digest_of_all_of_it() -> None:
    parent = "p" * (MAX_TASK_ID - len(":ship.3")) + "q"
    digest = hashlib.sha256(parent.encode()).hexdigest()[:16]
    derived = child_task_id(parent, "ship", incarnation=3)
    assert derived == parent[: MAX_TASK_ID - len(":ship.3") - 16 - 1] + "." + digest + ":ship.3"
    assert len(derived) == MAX_TASK_ID


def test_each_end_of_a_child_means_its_own_outcome_word_for_word() -> None:
    assert outcome_of("g-1:order", TaskState.PROCESSED) == ChildOutcome("done", "", "", permanent=False)
    assert outcome_of("g-1:order", TaskState.COMPENSATED) == ChildOutcome(
        "failed",
        "child task g-1:order could not complete and undid itself: nothing of it is left to undo",
        CHILD_COMPENSATED,
        permanent=True,
    )
    assert outcome_of("g-1:order", None, "terminated") == ChildOutcome(
        "failed", "child task g-1:order ended without a result: terminated", CHILD_FAILED, permanent=True
    )
    assert outcome_of("g-1:order", None) == ChildOutcome(
        "failed", "child task g-1:order ended without a result", CHILD_FAILED, permanent=True
    )
    assert outcome_of("g-1:order", TaskState.FAILED, "failed").message == (
        "child task g-1:order ended without a result: failed"
    )


def test_the_failure_types_and_the_note_are_what_the_mirror_and_the_operator_read() -> None:
    assert (CHILD_COMPENSATED, CHILD_FAILED) == ("ChildCompensated", "ChildFailed")
    assert waiting_note("g-1:order", "order") == "runs child task g-1:order (order); see `sas show g-1:order`"
