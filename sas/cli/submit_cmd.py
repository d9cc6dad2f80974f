"""``sas submit``: start a task of a registered type, with its input checked against the type's
model; ``--wait`` follows it to its end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, command_line, console, duration, print_json, shown, styled
from sas.cli.task_input import SET_OPTION, InputCommand

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


def register(app: typer.Typer) -> None:
    app.command(cls=InputCommand)(submit)


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
        tasks.check_new_task_id(task_id, "--id")
    payload = build_input(task_type, file, sets or ())
    task_id = tasks.check_new_task_id(task_id, "--id") if task_id else tasks.new_task_id(task_type)
    delay = tasks.parse_when(at, after)
    tasks.check_priority(priority)  # refused here, naming --priority

    async def go() -> dict[str, Any]:
        tasks_client = await context.task_client()
        # As a team's code starts it: an id that names a task already raises TaskIdTaken, which
        # says which task it is (a script must see that nothing new started).
        await tasks_client.submit(task_type, payload, task_id=task_id, delay=delay, priority=priority)
        out: dict[str, Any] = {"task_id": task_id, "submitted": True}
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
