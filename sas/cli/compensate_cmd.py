"""``sas compensate``: undo a task's completed steps in reverse order, for one task or a selection
(``sas/cli/bulk.py``); ``--force`` undoes one task past its pivot, audited."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer

from sas.cli.bulk_command import action_command, option
from sas.cli.output import CliError

FORCE = typer.Option(
    False, "--force", help="Undo a task past its pivot (its point of no return): one task, with --reason; audited."
)


def _check_force(given: Mapping[str, Any]) -> None:
    if given["force"] and given["task_id"] is None:
        raise CliError("--force undoes one task past its point of no return: give its id", code=2)
    if given["force"] and not given["reason"].strip():
        raise CliError("--force needs --reason: say why the task is undone past its point of no return", code=2)


# The workflow decides whether the task is past its pivot and audits the forced undo
# (workflows/core/requests.py): the same rule for the UI's signal and any other client.
compensate = action_command(
    "compensate",
    lambda client, who, given: client.compensate(
        given["task_id"], by=who, reason=given["reason"], force=given["force"]
    ),
    "Ask a task (or a selection) to undo its completed steps, in reverse order.",
    own=[option("force", bool, FORCE)],
    check=_check_force,
)


def register(app: typer.Typer) -> None:
    app.command()(compensate)
