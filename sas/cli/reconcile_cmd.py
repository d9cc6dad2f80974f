"""``sas reconcile``: compare the mirror with Temporal and repair the rows Temporal shows done.

The same reconciliation the Supervisor runs for quiet tasks (``sas.reconciliation.repairs``), on
demand through ``TaskClient.reconcile``: for one task, or for every task the mirror says is unfinished.
"""

from __future__ import annotations

import typer

from sas.cli import context
from sas.cli.output import console, print_json, table

MAX_TASKS = 10_000


def reconcile(
    task_id: str | None = typer.Option(None, "--task", help="Only this task (default: every unfinished task)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be repaired; change nothing."),
    limit: int = typer.Option(500, min=1, max=MAX_TASKS, help="Most unfinished tasks to look at."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Bring the state store in line with Temporal (repairs are audited; nothing is undone)."""
    from sas.cli import tasks

    if task_id is not None:
        tasks.check_task_id(task_id)
    done = context.call(lambda client: client.reconcile(task_id, dry_run=dry_run, limit=limit), usage=True)
    if as_json:
        print_json({"dry_run": dry_run, "tasks": [t.data for t in done.tasks]})
        return
    rows = [[t.task_id, t.temporal, r] for t in done.tasks for r in (t.repairs or ["in line"])]
    verb = "would repair" if dry_run else "repaired"
    console.print(table(f"reconcile ({verb})", ["task", "Temporal says", "row"], rows))
    console.print(f"{len(done.tasks)} tasks checked; {done.repaired} rows {verb}")


def register(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)
