"""``sas status``: a task's steps, states and failure counts; ``--follow`` prints each change
until it ends."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, console, print_json, shown, stands_at, styled, table

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
        context.run(lambda: _follow(task_id, as_json))
        return
    data = context.run(lambda: fetch_status(task_id))
    if data is None:
        from sas.cli import delayed
        from sas.client.status import scheduled

        later = context.run(lambda: context.with_client(lambda c: scheduled(c, task_id)))
        if later is not None:
            delayed.report(later, as_json)
            return
        raise CliError(f"no task {task_id!r}", "check the id with `sas list`")
    if as_json:
        print_json(data)
        return
    _print_status(data)


async def fetch_status(task_id: str, client: Any = None) -> dict[str, Any] | None:
    """The task as its running Scheduler answers, else as the state store has it, else as
    Temporal ended it before sas accepted it (``sas.client.status.fetch_status``)."""
    from sas.client.status import fetch_status as fetch
    from sas.client.store import StateStore

    store = StateStore(context.settings())
    store.require()  # no state store here is said before Temporal is asked
    client = client or await context.client()
    data = await fetch(client, store, task_id)
    if data is not None and data.get("source") == "scheduler":
        await _items_ended_so_far(client, task_id, data["steps"])
    return data


async def _items_ended_so_far(client: Any, task_id: str, steps: list[dict[str, Any]]) -> None:
    """A running fan-out's counts with the items its running batches have answered so far.

    The Scheduler learns its items' outcomes when their batch answers (a batch is a child
    workflow; its answer is one event), so its own counts move once a wave. Each batch answers
    a ``progress`` query with the items it has ended: read here, they cost no event in either
    history, where a signal to the parent per item would cost both. Asked only of a task with a
    fan-out step Processing: one describe, and one query per running batch."""
    from temporalio.service import RPCError

    from sas.task_models import StepState
    from sas.task_models.fanout import PROGRESS_QUERY, BatchProgress, describe_counts, running_batches, with_ended

    running = {
        s["name"]: s
        for s in steps
        if s["state"] == StepState.PROCESSING and isinstance(s.get("result"), dict) and s["result"].get("processing")
    }
    if not running:
        return
    try:
        described = await client.get_workflow_handle(task_id).describe()
        ended: dict[str, dict[str, int]] = {}
        for batch in running_batches(described.raw_description):
            progress = await client.get_workflow_handle(batch).query(PROGRESS_QUERY, result_type=BatchProgress)
            if progress.undo or progress.step not in running:
                continue
            into = ended.setdefault(progress.step, {})
            for state, n in progress.ended.items():
                into[state] = into.get(state, 0) + n
    except RPCError:
        return  # a batch that no worker answers for now: the Scheduler's own counts stand
    for name, counts in ended.items():
        step = running[name]
        step["result"] = with_ended(step["result"], counts)
        step["note"] = describe_counts(step["result"])


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


async def _follow(task_id: str, as_json: bool) -> None:
    """Print each change of the task's state, steps and events until it ends."""
    import asyncio
    import json as _json

    from sas.task_models import TaskState

    client = await context.client()
    seen_events = 0
    last: tuple[Any, ...] | None = None
    while True:
        data = await fetch_status(task_id, client)
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
