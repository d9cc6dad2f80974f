"""``sas list``: tasks from the state store, newest first, and workflows stuck before it saw
them (``TaskClient.list``)."""

from __future__ import annotations

import typer

from sas.cli import context
from sas.cli.output import ago, console, print_json, shown, styled, table

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


def register(app: typer.Typer) -> None:
    app.command("list")(list_tasks)


def list_tasks(
    state: str | None = typer.Option(
        None, help="Only tasks in this state (e.g. Error, Processing, Compensated; Stuck: not yet in the mirror)."
    ),
    limit: int = typer.Option(50, min=1, max=10_000),
    as_json: bool = JSON,
    team: str | None = typer.Option(None, help="Only the tasks of this team's task types."),
) -> None:
    """List tasks from the state store, newest first, and workflows stuck before it saw them."""
    found = context.call(lambda tasks: tasks.list(state, limit, team=team))
    if as_json:
        print_json([t.data for t in found.tasks])
        return
    stuck, rows = found.stuck, found.in_mirror
    if not found.tasks:
        wanted = found.state
        console.print("no tasks" + (f" in state {shown(wanted)}" if wanted else "") + " in this state store")
        return
    console.print(
        table(
            f"{len(rows)} task(s)" + (f", {len(stuck)} stuck before the mirror saw them" if stuck else ""),
            ["task", "type", "state", "step", "FailureCount", "updated"],
            [[t.task_id, "?", styled(t.state), "-", "-", ago(t.updated_at)] for t in stuck]
            + [
                [t.task_id, t.task_type, styled(t.state), t.current_step, t.failure_count, ago(t.updated_at)]
                for t in rows
            ],
        )
    )
    if stuck:
        console.print("Stuck: its workflow task keeps failing; `sas alerts` says why and what to do.")
