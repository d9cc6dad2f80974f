"""``sas status``: a task's steps, states and failure counts; ``--follow`` prints each change
until it ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from sas.cli import context
from sas.cli.output import console, print_json, shown, stands_at, styled, table

if TYPE_CHECKING:
    from sas.client.task_client import TaskClient

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


def register(app: typer.Typer) -> None:
    app.command()(status)


def status(
    task_id: str = typer.Argument(..., help="Task id."),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Keep printing changes until the task ends (Ctrl-C stops)."
    ),
    as_json: bool = JSON,
) -> None:
    """Show a task's steps, states and failure counts (asks the Scheduler, else the state store)."""
    from sas.cli import tasks

    tasks.check_task_id(task_id)
    if follow:
        context.call(lambda client: _follow(client, task_id, as_json))
        return
    view = context.call(lambda client: client.status(task_id))
    if view.source == "delayed":
        from sas.cli import delayed

        delayed.report(view.data, as_json)
        return
    if as_json:
        print_json(view.data)
        return
    _print_status(view.data)


def _print_status(data: dict[str, Any]) -> None:
    if data.get("accepted") is False:
        from sas.cli.unaccepted import report

        report(data)
        return
    where = stands_at(data["state"], data["steps"], data.get("current_step"))
    console.print(
        f"[bold]{shown(data['task_id'])}[/bold] ({shown(data['task_type'])}): {styled(data['state'])}"
        + shown(where)
        + (" - [bold red]needs an operator[/bold red]" if data.get("needs_operator") else "")
    )
    console.print(
        table(
            None,
            ["#", "step", "state", "FailureCount", "runs", "last error or note"],
            [
                [
                    s["position"],
                    s["name"],
                    styled(s["state"]),
                    s["failure_count"],
                    s.get("runs") or "",
                    s.get("last_error") or s.get("note") or "",
                ]
                for s in data["steps"]
            ],
        )
    )
    for event in data.get("events", [])[-10:]:
        console.print(f"  {shown(event)}")


async def _follow(client: TaskClient, task_id: str, as_json: bool) -> None:
    """Print each change of the task's state, steps and events until it ends."""
    import asyncio
    import json as _json

    from sas.client.errors import TaskNotFound
    from sas.task_models import TaskState

    seen_events = 0
    last: tuple[Any, ...] | None = None
    while True:
        try:
            view = await client.status(task_id)
        except TaskNotFound:
            view = None
        # A delayed task has not started yet: said once, as for an id nothing knows yet.
        data = view.data if view is not None and view.source != "delayed" else None
        if data is None:
            if last is None:
                console.print(f"{shown(task_id)}: not started yet (or unknown); waiting")
                last = ()
        else:
            shape = (data["state"], tuple((s["name"], s["state"], s["failure_count"]) for s in data["steps"]))
            events = data.get("events", [])
            if shape != last:
                if as_json:
                    print(
                        _json.dumps({"task_id": task_id, "state": data["state"], "steps": data["steps"]}, default=str),
                        flush=True,
                    )
                else:
                    steps = "  ".join(f"{shown(s['name'])}={styled(s['state'])}" for s in data["steps"])
                    console.print(f"{shown(task_id)}: {styled(data['state'])}  {steps}")
                last = shape
            for event in events[seen_events:]:
                if not as_json:
                    console.print(f"  {shown(event)}")
            seen_events = len(events)
            if data["state"] in (TaskState.PROCESSED, TaskState.COMPENSATED):
                return
        await asyncio.sleep(1)
