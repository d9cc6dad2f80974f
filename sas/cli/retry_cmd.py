"""``sas retry``: re-run the step a task waits at (or was parked at), for one task or a
selection (``sas/cli/bulk.py``)."""

from __future__ import annotations

import typer

from sas.cli.bulk_command import action_command

retry = action_command(
    "retry",
    lambda client, who, given: client.retry(given["task_id"], step=given["step"], by=who, reason=given["reason"]),
    "Ask a task (or a selection) to re-run the step that waits for a decision (or was parked by `sas park`).",
    step=typer.Option(None, help="Step to retry (default: the one waiting); or select tasks at it."),
)


def register(app: typer.Typer) -> None:
    app.command()(retry)
