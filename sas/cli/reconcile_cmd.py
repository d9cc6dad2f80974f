"""``sas reconcile``: compare the mirror with Temporal and repair the rows Temporal shows done.

The same reconciliation the Supervisor runs for quiet tasks (``supervisor/reconcile.py``), on
demand: for one task, or for every task the mirror says is unfinished.
"""

from __future__ import annotations

from typing import Any

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
    found = context.run(lambda: _reconcile(task_id, dry_run, limit))
    if as_json:
        print_json({"dry_run": dry_run, "tasks": found})
        return
    rows = [[f["task_id"], f["temporal"], r] for f in found for r in (f["repairs"] or ["in line"])]
    verb = "would repair" if dry_run else "repaired"
    console.print(table(f"reconcile ({verb})", ["task", "Temporal says", "row"], rows))
    repaired = sum(len(f["repairs"]) for f in found)
    console.print(f"{len(found)} tasks checked; {repaired} rows {verb}")


# What task_fault says of a look that outlasted this (the status query's own timeout).
_QUERY_TIMEOUT_S = 5.0


async def _reconcile(task_id: str | None, dry_run: bool, limit: int) -> list[dict[str, Any]]:
    from sas import state_store
    from sas.runtime.failures import reaching_state_store
    from sas.supervisor.reconcile import open_task_ids, reconcile_task
    from sas.supervisor.task_faults import task_fault

    settings = context.settings()
    engine = context.open_engine(settings)
    client = await context.client()
    sessions = state_store.session_factory(engine)
    out: list[dict[str, Any]] = []
    try:
        with reaching_state_store(settings.database.url):
            ids = [task_id] if task_id is not None else await open_task_ids(sessions, limit)
            for one in ids:
                try:
                    result = await reconcile_task(sessions, client, one, dry_run=dry_run)
                except Exception as err:
                    # One task that cannot be looked at (its type no longer registered, a status
                    # too large to answer) says so on its own line; the others are reconciled.
                    fault = task_fault(err, _QUERY_TIMEOUT_S)
                    if fault is None:
                        raise
                    out.append({"task_id": one, "temporal": f"not reconciled: {fault.cause}", "repairs": []})
                    continue
                if result is None:
                    out.append({"task_id": one, "temporal": "no such task in the state store", "repairs": []})
                    continue
                repairs = [r.describe().removeprefix(f"{one} ") for r in result.repairs]
                out.append({"task_id": one, "temporal": result.temporal, "repairs": repairs})
    finally:
        await engine.dispose()
    return out


def register(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)
