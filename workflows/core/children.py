"""The pure rules of a child step (``ChildTask``): the child's task id, and what the child's end
means for its parent's step. No I/O and nothing from Temporal; the shell
(``workflows/shell/children.py``) carries them out.

- The child's id is ``<parent id>:<step>``: stable across the parent's resets and retries, so a
  step started again finds its child (Temporal refuses a second workflow of that id while it
  runs, and the state store refuses a second task of it). A parent's later incarnation (``sas
  resubmit``) has children of their own: ``<parent id>:<step>.<incarnation>``. An id that would
  be longer than a task id may be keeps the parent id's start and a digest of all of it.
- The child ended Processed: the step is done. The child ended Compensated (it undid itself):
  the step failed for good, with nothing of it left to undo. A child whose workflow ended without
  a result (its input refused, terminated, timed out) fails the step for good too: a task id is
  one task, so starting it again would be refused; the Supervisor undoes the parent, and cleans
  the child up as any task closed from outside.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from sas.task_models import TaskState
from sas.task_models.ids import MAX_TASK_ID

# The failure type of a child step whose child undid itself: a permanent failure of the step.
CHILD_COMPENSATED = "ChildCompensated"
# The failure type of a child step whose child's workflow ended otherwise (failed, terminated).
CHILD_FAILED = "ChildFailed"
# What the plan records as a child step's Agent: child.<task type> (ChildTask.agent).
CHILD_AGENT = "child."
# The memo a parent gives its child: which step of which task it is (the child records it at accept).
PARENT_MEMO = "sas_parent"
_DIGEST = 16


def child_task_id(parent_id: str, step: str, incarnation: int = 1) -> str:
    """The task id of the child that step ``step`` of task ``parent_id`` runs."""
    suffix = f":{step}" + (f".{incarnation}" if incarnation > 1 else "")
    if len(parent_id) + len(suffix) <= MAX_TASK_ID:
        return parent_id + suffix
    digest = hashlib.sha256(parent_id.encode()).hexdigest()[:_DIGEST]
    keep = MAX_TASK_ID - len(suffix) - _DIGEST - 1
    return f"{parent_id[:keep]}.{digest}{suffix}"


@dataclass(frozen=True)
class ChildOutcome:
    """What a child's end means for its parent's step: ``done``, or a failure (its message and
    type, and whether it is permanent)."""

    kind: Literal["done", "failed"]
    message: str = ""
    error_type: str = ""
    permanent: bool = False


def outcome_of(child_id: str, state: TaskState | None, why: str = "") -> ChildOutcome:
    """The step's outcome from the child's final task state (None: its workflow ended without a
    result - failed, terminated, timed out; ``why`` says how)."""
    if state == TaskState.PROCESSED:
        return ChildOutcome("done")
    if state == TaskState.COMPENSATED:
        return ChildOutcome(
            "failed",
            f"child task {child_id} could not complete and undid itself: nothing of it is left to undo",
            CHILD_COMPENSATED,
            permanent=True,
        )
    said = f": {why}" if why else ""
    return ChildOutcome("failed", f"child task {child_id} ended without a result{said}", CHILD_FAILED, permanent=True)


def waiting_note(child_id: str, task_type: str) -> str:
    """What the parent's step says while its child runs."""
    return f"runs child task {child_id} ({task_type}); see `sas show {child_id}`"
