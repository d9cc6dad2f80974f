"""Whether a task's rows show it past its point of no return (its type's pivot step).

The same rule as the Scheduler's (``workflows/core/machine.py::TaskCore.past_pivot``), read from
the mirror: for a task whose workflow is gone (closed from outside), the rows are all there is,
and a task past its pivot is never undone on their word.
"""

from __future__ import annotations

from collections.abc import Sequence

from sas.state_store.rows import StepRow
from sas.task_models import StepState

_NOT_RUN = (StepState.PENDING, StepState.SKIPPED)
# The states a step refused for good may be in: refused, it did nothing.
_REFUSED_STATES = (StepState.FAILED, StepState.COMPENSATION_FAILED, StepState.ERROR)


def past_point_of_no_return(steps: Sequence[StepRow]) -> str | None:
    """Why the task is past its pivot, or None while it may still be undone: a step after the
    pivot has run, or the pivot was attempted with an outcome that may be its effect (all but a
    refusal for good)."""
    pivot = next((s for s in steps if s.pivot == "pivot"), None)
    if pivot is None:
        return None
    after = [s.name for s in steps if s.pivot == "forward_only" and s.state not in _NOT_RUN]
    if after:
        return f"step {after[0]}, after the pivot {pivot.name}, has run"
    if pivot.state in _NOT_RUN or (pivot.permanent and pivot.state in _REFUSED_STATES):
        return None
    return f"the pivot {pivot.name} has been attempted ({pivot.state})"
