"""What the Supervisor does about a task whose workflow Temporal says was not left to sas: closed
from outside, gone from Temporal, or stuck on a failing workflow task. Pure: the orphan check
(``sas.supervisor.detect.orphans``) asks Temporal and the mirror, then acts on what is decided
here, so the rule "never undo on the mirror's word, never undo past the pivot" has one home.
"""

from __future__ import annotations

from dataclasses import dataclass

from sas.supervisor.models import AlertSpec
from sas.task_models.ids import cleanup_workflow_id


@dataclass(frozen=True)
class Closed:
    """A task closed from outside: whether its clean-up is started (``undo``), why, and the
    one alert raised either way."""

    undo: bool
    reason: str
    alert: AlertSpec


def closed_from_outside(task_id: str, state: str, how: str, past_pivot: str | None, done: list[str]) -> Closed:
    """``how`` the workflow was closed (terminated, failed, ...), the mirror's ``state``, the step
    past the point of no return if one is (``past_pivot``), and the steps ``done`` that an undo
    would take back. Past the pivot nothing is undone: going back would break what must only go
    forward, so an operator finishes it."""
    cleanup = cleanup_workflow_id(task_id)
    if past_pivot is not None:
        return Closed(
            undo=False,
            reason=f"workflow {how} past its point of no return ({past_pivot}); nothing undone",
            alert=AlertSpec(
                severity="critical",
                kind="closed_past_pivot",
                message=(
                    f"task {task_id}: its workflow was {how} from outside past its point of no return ({past_pivot});"
                    " nothing was undone"
                ),
                suggested_action=(
                    f"finish it by hand (`sas show {task_id}`: what was done), or resubmit it "
                    f"(`sas resubmit {task_id} --reason ...`); then `sas alerts resolve`"
                ),
            ),
        )
    listed = ", ".join(done)
    return Closed(
        undo=True,
        reason=f"workflow {how} while the mirror says {state}; undoing {listed or 'nothing'} in {cleanup}",
        alert=AlertSpec(
            severity="critical",
            kind="workflow_closed",
            message=f"task {task_id}: its workflow was {how} from outside while the mirror said {state}",
            suggested_action=(
                f"completed steps ({listed or 'none'}) are being undone by {cleanup}; "
                "find out who closed it; resubmit under a new id if the customer still wants it"
            ),
        ),
    )


def history_gone(task_id: str, state: str) -> AlertSpec:
    """Temporal no longer knows the workflow (retention, a namespace reset). Its history was the
    only proof of what it did, so nothing is undone on the mirror's word: one alert."""
    return AlertSpec(
        severity="critical",
        kind="history_gone",
        message=(
            f"task {task_id}: Temporal no longer knows its workflow (history expired or the namespace was "
            f"reset) while the mirror says {state}; nothing was undone"
        ),
        suggested_action=(
            f"check the remote services' records for {task_id} (`sas show {task_id}`); "
            "undo by hand what must be undone, then `sas alerts resolve`"
        ),
    )


def workflow_stuck(task_id: str, attempt: int, stuck_after: int) -> AlertSpec | None:
    """A running workflow whose workflow task failed ``attempt`` times in a row cannot act on any
    signal, so the ladder is no use: an operator is told once it reaches ``stuck_after``. Usually
    deployed code no longer matches its history (non-determinism)."""
    if attempt < stuck_after:
        return None
    return AlertSpec(
        severity="critical",
        kind="workflow_stuck",
        message=(
            f"task {task_id}: its workflow task keeps failing (attempt {attempt}), so it cannot make progress "
            "(usually new workflow code that does not match its history: a non-determinism error)"
        ),
        suggested_action=(
            "see the WorkflowTaskFailed event in the Temporal UI; deploy the previous worker version, or fix the "
            "change with workflow.patched (docs/replay.md), or reset the workflow to an earlier event"
        ),
    )
