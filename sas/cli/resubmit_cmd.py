"""``sas resubmit``: run a task again - a parked one from FailureCount 0, a finished one as its
next incarnation - for one task or a selection (``sas/cli/bulk.py``)."""

from __future__ import annotations

import typer

from sas.cli.bulk_command import action_command

resubmit = action_command(
    "resubmit",
    lambda client, who, given: client.resubmit(given["task_id"], by=who, reason=given["reason"]),
    "Run a task (or a selection) again: a parked one with FailureCount 0, a finished one as a new incarnation.",
)


def register(app: typer.Typer) -> None:
    app.command()(resubmit)
