"""What the operator commands on a task share (``sas retry``, ``resubmit``, ``compensate``,
``park``, ``approve``, ``reject``): who acts and why as options, the task id or a selection, and
the one way each acts - through the task client (``sas.client``: requests go to the workflow that
answers for the task, its Scheduler or its clean-up) - and then says how to follow the task."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import typer

from sas.cli import context
from sas.cli.output import command_line, console, shown

if TYPE_CHECKING:
    from sas.client.task_client import TaskClient

BY = typer.Option(None, help="Who is acting (default: $USER).")
REASON = typer.Option("", help="Why, for the record.")
# Bulk actions (sas/cli/bulk.py): no task id, a selection instead; --dry-run lists, --yes acts.
TASK_ID = typer.Argument(None, help="Task id; or none, and select tasks with the options below.")


def follow_hint(task_id: str, said: str) -> None:
    console.print(f"{shown(task_id)}: {shown(said)}; follow it with:")
    command_line(f"  sas status {task_id} --follow")


def act(task_id: str, by: str | None, reason: str, action: Callable[[TaskClient, str], Awaitable[Any]]) -> Any:
    """Check the id, who and why as typed, then run ``action`` (given the task client and the
    actor) on the task client, whose typed errors ``main`` prints as one line."""
    from sas.cli import audit, tasks

    tasks.check_task_id(task_id)
    who = audit.actor(by)
    audit.check_reason(reason)

    async def go() -> Any:
        return await action(await context.task_client(), who)

    return context.run(go)
