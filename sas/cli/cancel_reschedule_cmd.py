"""``sas cancel`` and ``sas reschedule``: a delayed task before it runs, and recurring tasks.

The task client does both (``sas.client.delayed`` says how and when each applies, and audits
each); these commands take the id, the new start, who and why, and print what was done.
"""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, console, print_json, shown


def register(app: typer.Typer) -> None:
    app.command("cancel")(cancel)
    app.command("reschedule")(reschedule)


BY = typer.Option(None, help="Who is acting (default: $USER).")
REASON = typer.Option("", help="Why, for the record.")


def cancel(
    task_id: str = typer.Argument(..., help="A delayed task's id, or a schedule's id."),
    by: str | None = BY,
    reason: str = REASON,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Cancel a delayed task before it starts, or a schedule (no more runs)."""
    from sas.cli import audit, tasks

    tasks.check_task_id(task_id)
    who, why = audit.actor(by), audit.check_reason(reason)

    async def go() -> dict[str, Any]:
        return (await (await context.task_client()).cancel(task_id, by=who, reason=why)).data

    out = context.run(go)
    if as_json:
        print_json(out)
        return
    console.print(f"{shown(task_id)}: {shown(out['changed'])}")


def reschedule(
    task_id: str = typer.Argument(..., help="A delayed task's id."),
    at: str | None = typer.Option(None, "--at", help="New start time (ISO 8601)."),
    after: str | None = typer.Option(None, "--in", help="Start after this long from now: 90s, 15m, 2h, 1d."),
    by: str | None = BY,
    reason: str = REASON,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Move a delayed task's start to another time (--at or --in)."""
    from sas.cli import audit, tasks

    # Refused before its delayed run is terminated: the new run could not start under it.
    tasks.check_new_task_id(task_id)
    delay = tasks.parse_when(at, after)
    if delay is None:
        raise CliError("give the new start with --at TIME or --in DURATION", "e.g. --in 2h")
    who, why = audit.actor(by), audit.check_reason(reason)

    async def go() -> dict[str, Any]:
        return (await (await context.task_client()).reschedule(task_id, delay, by=who, reason=why)).data

    out = context.run(go)
    if as_json:
        print_json(out)
        return
    console.print(f"{shown(task_id)}: {shown(out['changed'])}")
