"""``sas submit | status | list``: start a task, follow it, list tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sas.cli import context
from sas.cli.output import (
    CliError,
    ago,
    command_line,
    console,
    duration,
    print_json,
    shown,
    stands_at,
    styled,
    table,
)
from sas.cli.task_input import SET_OPTION, InputCommand

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
# `sas list`'s name for a workflow stuck in workflow task failures before the mirror saw it.
STUCK = "Stuck"


def register(app: typer.Typer) -> None:
    app.command(cls=InputCommand)(submit)
    app.command()(status)
    app.command("list")(list_tasks)


def submit(
    file: Path | None = typer.Argument(None, help="JSON file with the task input ('-' for stdin)."),
    input_file: Path | None = typer.Option(
        None, "--input", "-i", help="JSON file with the task input ('-' for stdin); the same as FILE."
    ),
    task_id: str | None = typer.Option(None, "--id", help="Task id (= workflow id). Default: <type>-<random>."),
    task_type: str | None = typer.Option(
        None, "--type", help="The task type, required: any registered one (`sas types` lists them)."
    ),
    sets: list[str] = SET_OPTION,
    at: str | None = typer.Option(None, "--at", help="Start at this time (ISO 8601), not now."),
    after: str | None = typer.Option(None, "--in", help="Start after this long: 90s, 15m, 2h, 1d."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the task to finish and print its result."),
    priority: int | None = typer.Option(
        None, "--priority", help="1 (most urgent) to 5: a backlog hands out urgent tasks first. Default: 3."
    ),
    as_json: bool = JSON,
) -> None:
    """Submit a task: sas submit --type TYPE --input FILE and/or --set FIELD=VALUE ..., validated
    against the type's input model (`sas types` shows its fields)."""
    from sas.cli import tasks
    from sas.cli.task_input import build_input, require_type

    if file is not None and input_file is not None:
        raise CliError("give the input as FILE or --input FILE, not both")
    file = file if file is not None else input_file
    task_type = require_type(task_type)
    if task_id:
        tasks.check_task_id(task_id, "--id")
    payload = build_input(task_type, file, sets or ())
    task_id = tasks.check_task_id(task_id, "--id") if task_id else tasks.new_task_id(task_type)
    delay = tasks.parse_when(at, after)
    urgency = tasks.check_priority(priority)

    async def go() -> dict[str, Any]:
        from sas.client.submitting import existing_task, start

        tasks_client = await context.task_client()
        client = tasks_client.temporal
        created = await start(
            client, tasks_client.settings.temporal.task_queue, task_type, task_id, payload, delay, urgency
        )
        if not created:
            # A task id is one task: a script must see that nothing new started.
            raise await existing_task(client, tasks_client.store, task_id)
        out: dict[str, Any] = {"task_id": task_id, "submitted": created}
        if delay is not None:
            out["starts_in_s"] = round(delay.total_seconds(), 1)
        if wait:
            outcome = await tasks_client.wait(task_id)
            out.update(state=outcome.state, exit_code=outcome.code, detail=outcome.detail)
            if outcome.result is not None:
                out["result"] = outcome.result
        return out

    out = context.run(go)
    if as_json:
        print_json(out)
    else:
        when = f", starting in {duration(out['starts_in_s'])}" if delay is not None else ""
        console.print(f"submitted {shown(task_type)} [bold]{shown(task_id)}[/bold]{when}; follow it with:")
        command_line(f"  sas status {task_id} --follow")
        if wait:
            console.print(f"{styled(out['state'])}: {shown(out['detail'])}")
    if wait and out["exit_code"]:
        # A script tells a task that was undone, or waits for an operator, from one that is done.
        raise typer.Exit(out["exit_code"])


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
    return await fetch(client or await context.client(), store, task_id)


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
