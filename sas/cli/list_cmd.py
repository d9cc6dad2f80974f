"""``sas list``: tasks from the state store, newest first, and workflows stuck before it saw
them."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, ago, console, print_json, shown, styled, table

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
# `sas list`'s name for a workflow stuck in workflow task failures before the mirror saw it.
STUCK = "Stuck"


def register(app: typer.Typer) -> None:
    app.command("list")(list_tasks)


# Stuck workflows `sas list` shows besides the mirror's tasks, however small --limit is.
STUCK_SHOWN = 10_000


def list_tasks(
    state: str | None = typer.Option(
        None, help="Only tasks in this state (e.g. Error, Processing, Compensated; Stuck: not yet in the mirror)."
    ),
    limit: int = typer.Option(50, min=1, max=10_000),
    as_json: bool = JSON,
) -> None:
    """List tasks from the state store, newest first, and workflows stuck before it saw them."""
    from sas.state_store.queries import failure_counts, stuck_before_the_mirror
    from sas.state_store.queries import list_tasks as query
    from sas.task_models import TaskState

    wanted = None
    if state is not None:
        by_name = {s.value.lower(): s.value for s in TaskState} | {STUCK.lower(): STUCK}
        wanted = by_name.get(state.lower())
        if wanted is None:
            raise CliError(f"--state {state!r}: unknown state", f"use one of: {', '.join(by_name.values())}")

    async def load(session: Any) -> tuple[list[Any], dict[str, int], list[Any]]:
        # A workflow stuck in workflow task failures before its first write has no row: the
        # Supervisor's workflow_stuck alert (from TemporalReportedProblems) is how it is known.
        # Every one of them (not the first 50 of 112): each is a workflow that cannot move.
        # --limit bounds the mirror's tasks.
        stuck = await stuck_before_the_mirror(session, STUCK_SHOWN) if wanted in (None, STUCK) else []
        tasks = await query(session, wanted, limit) if wanted != STUCK else []
        return tasks, await failure_counts(session, [t.task_id for t in tasks]), stuck

    rows, counts, stuck = context.run(lambda: context.with_read_session(load))
    if as_json:
        print_json(
            [
                {
                    "task_id": a.task_id,
                    "task_type": None,
                    "state": STUCK,
                    "current_step": None,
                    "failure_count": 0,
                    "updated_at": a.updated_at,
                    "in_mirror": False,
                    "why": a.message,
                }
                for a in stuck
            ]
            + [
                {
                    "task_id": t.task_id,
                    "task_type": t.task_type,
                    "state": t.state,
                    "current_step": t.current_step,
                    "failure_count": counts.get(t.task_id, 0),
                    "updated_at": t.updated_at,
                    "in_mirror": True,
                }
                for t in rows
            ]
        )
        return
    if not rows and not stuck:
        console.print("no tasks" + (f" in state {shown(wanted)}" if wanted else "") + " in this state store")
        return
    console.print(
        table(
            f"{len(rows)} task(s)" + (f", {len(stuck)} stuck before the mirror saw them" if stuck else ""),
            ["task", "type", "state", "step", "FailureCount", "updated"],
            [[a.task_id, "?", styled(STUCK), "-", "-", ago(a.updated_at)] for a in stuck]
            + [
                [t.task_id, t.task_type, styled(t.state), t.current_step, counts.get(t.task_id, 0), ago(t.updated_at)]
                for t in rows
            ],
        )
    )
    if stuck:
        console.print("Stuck: its workflow task keeps failing; `sas alerts` says why and what to do.")
