"""``sas approve`` and ``sas reject``: answer a task's step that waits for an approval - the task
goes on, or is undone. One module: the two are one answer, yes or no."""

from __future__ import annotations

import typer

from sas.cli import acting


def register(app: typer.Typer) -> None:
    app.command()(approve)
    app.command()(reject)


WAIT_STEP = typer.Option(None, help="The wait step (default: the one waiting).")


def approve(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = WAIT_STEP,
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Approve a task's step that waits for an approval: the task goes on."""
    _answer_wait(task_id, step, approved=True, by=by, reason=reason)


def reject(
    task_id: str = typer.Argument(..., help="Task id."),
    step: str | None = WAIT_STEP,
    by: str | None = acting.BY,
    reason: str = acting.REASON,
) -> None:
    """Reject a task's step that waits for an approval: the task is undone."""
    _answer_wait(task_id, step, approved=False, by=by, reason=reason)


def _answer_wait(task_id: str, step: str | None, *, approved: bool, by: str | None, reason: str) -> None:
    """The wait step's own update with who, whether and why (``sas.client.operator.answer_wait``)."""
    verdict = "approve" if approved else "reject"
    done = acting.act(
        task_id, by, reason, lambda c, who: getattr(c, verdict)(task_id, step=step, by=who, reason=reason)
    )
    acting.follow_hint(task_id, done.message)
