"""The ``sas`` command: run the parts, submit and inspect tasks, act as an operator."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import typer
from temporalio.service import RPCError

from sas_cli.output import CliError, ago, console, duration, err_console, print_json, styled, table

T = TypeVar("T")

app = typer.Typer(
    name="sas",
    help="Scheduler Agent Supervisor on Temporal: tasks that complete or are undone as a whole.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
alerts_app = typer.Typer(help="Operator alerts: list, acknowledge, resolve.", invoke_without_command=True)
app.add_typer(alerts_app, name="alerts")

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


def _settings():  # type: ignore[no-untyped-def]
    from sas_cli.runtime import SETTINGS_ERRORS, describe_settings_error
    from settings import get_settings

    try:
        return get_settings()
    except SETTINGS_ERRORS as err:
        raise CliError(
            f"invalid settings:\n{describe_settings_error(err)}", "fix the SAS_* environment variables or .env", code=2
        ) from None


def _run(make: Callable[[], Awaitable[T]]) -> T:
    try:
        return asyncio.run(make())
    except RuntimeError as err:
        if "connect" in str(err).lower():
            address = _settings().temporal.address
            raise CliError(
                f"cannot reach Temporal at {address}",
                "start it with `sas up` (or `sas demo`), or point SAS_TEMPORAL__ADDRESS at your cluster",
            ) from None
        raise


async def _client():  # type: ignore[no-untyped-def]
    from sas_cli.connect import connect

    settings = _settings()
    return await connect(settings.temporal, encryption=settings.encryption)


async def _with_session(fn: Callable[[Any], Awaitable[T]]) -> T:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    import state_store

    settings = _settings()
    engine = state_store.create_engine(settings.database)
    try:
        async with state_store.session_factory(engine)() as session:
            return await fn(session)
    except (OperationalError, ProgrammingError) as err:
        raise CliError(
            f"cannot read the state store at {settings.database.url}: {err.orig}",
            "run `sas migrate`, or check SAS_DATABASE__URL",
        ) from None
    finally:
        await engine.dispose()


# ---------------------------------------------------------------- processes


@app.command()
def migrate() -> None:
    """Create or upgrade the state store's tables (SAS_DATABASE__URL)."""
    import state_store

    url = _settings().database.url
    state_store.upgrade(url)
    console.print(f"state store at {url} is up to date")


@app.command()
def setup() -> None:
    """Register sas's search attributes in the Temporal namespace (once per cluster)."""
    from sas_cli.setup_cluster import register_search_attributes

    added = _run(lambda: _with_client(register_search_attributes))
    console.print(f"search attributes: {', '.join(added) or 'all already registered'}")


async def _with_client(fn: Callable[[Any], Awaitable[T]]) -> T:
    return await fn(await _client())


@app.command()
def worker() -> None:
    """Run the Scheduler + Agents worker (same as `python worker.py`)."""
    from sas_cli.runtime import run_entry
    from worker import run_worker

    run_entry(run_worker)


@app.command()
def supervisor() -> None:
    """Run a Supervisor worker (same as `python -m supervisor`)."""
    from sas_cli.runtime import run_entry
    from supervisor.worker import run_supervisor

    run_entry(run_supervisor)


@app.command()
def services(
    port: int = typer.Option(8081, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    ledger: Path = typer.Option(Path(".sas/ledger.db"), help="SQLite file of the ledger."),
    enable_faults: bool = typer.Option(False, "--enable-faults", help="Turn on the fault-injection admin API."),
) -> None:
    """Run the remote services (inventory, payment, shipping) the Agents call."""
    import sys

    args = [sys.executable, "-m", "remote_services", "--host", host, "--port", str(port), "--ledger", str(ledger)]
    os.execv(sys.executable, args + (["--enable-faults"] if enable_faults else []))


# -------------------------------------------------------------------- tasks


@app.command()
def submit(
    file: Path | None = typer.Argument(None, help="JSON file with the task input ('-' for stdin)."),
    task_id: str | None = typer.Option(None, "--id", help="Task id (= workflow id). Default: <type>-<random>."),
    task_type: str = typer.Option("order", "--type", help="order | preorder"),
    customer_id: str | None = typer.Option(None, "--customer"),
    sku: str | None = typer.Option(None),
    quantity: int | None = typer.Option(None),
    amount_cents: int | None = typer.Option(None, "--amount-cents"),
    currency: str | None = typer.Option(None),
    card: str | None = typer.Option(None),
    address: str | None = typer.Option(None),
    at: str | None = typer.Option(None, "--at", help="Start at this time (ISO 8601), not now."),
    after: str | None = typer.Option(None, "--in", help="Start after this long: 90s, 15m, 2h, 1d."),
    wait: bool = typer.Option(False, "--wait", help="Wait for the task to finish and print its result."),
    as_json: bool = JSON,
) -> None:
    """Submit a task. Example: sas submit --sku BOOK-1 --quantity 1 --amount-cents 1299 --customer c1 --address '1 Main St'"""
    from sas_cli import tasks

    flags = {
        "customer_id": customer_id,
        "sku": sku,
        "quantity": quantity,
        "amount_cents": amount_cents,
        "currency": currency,
        "card": card,
    }
    if task_type == "order":
        flags["address"] = address
    payload = tasks.build_input(task_type, file, flags)
    task_id = tasks.check_task_id(task_id) if task_id else tasks.new_task_id(task_type)
    delay = tasks.parse_when(at, after)

    async def go() -> dict[str, Any]:
        client = await _client()
        created = await tasks.submit(client, _settings(), task_type, task_id, payload, start_delay=delay)
        out: dict[str, Any] = {"task_id": task_id, "submitted": created}
        if delay is not None:
            out["starts_in_s"] = round(delay.total_seconds(), 1)
        if wait:
            from task_models import TaskResult

            out["result"] = (await client.get_workflow_handle(task_id, result_type=TaskResult).result()).model_dump(
                mode="json"
            )
        return out

    out = _run(go)
    if as_json:
        print_json(out)
        return
    if out["submitted"]:
        when = f", starting in {duration(out['starts_in_s'])}" if delay is not None else ""
        console.print(f"submitted {task_type} [bold]{task_id}[/bold]{when}; follow it with `sas status {task_id}`")
    else:
        console.print(f"{task_id} was already submitted: it runs once. See `sas status {task_id}`.")
    if wait:
        console.print(f"finished: {styled(out['result']['state'])}")


@app.command()
def status(
    task_id: str = typer.Argument(..., help="Task id."),
    follow: bool = typer.Option(
        False, "--follow", "-f", help="Keep printing changes until the task ends (Ctrl-C stops)."
    ),
    as_json: bool = JSON,
) -> None:
    """Show a task's steps, states and failure counts (asks the Scheduler, else the state store)."""
    from sas_cli import tasks

    tasks.check_task_id(task_id)
    if follow:
        _run(lambda: _follow(task_id, as_json))
        return
    data = _run(lambda: _fetch_status(task_id))
    if data is None:
        raise CliError(f"no task {task_id!r}", "check the id with `sas list`")
    if as_json:
        print_json(data)
        return
    _print_status(data)


async def _fetch_status(task_id: str, client: Any = None) -> dict[str, Any] | None:
    from sas_cli import tasks
    from state_store.queries import get_task

    try:
        live = await tasks.query_status(client or await _client(), task_id)
    except RPCError:
        live = None  # no worker to answer, or not started yet: the state store still knows
    if live is not None and live.steps:
        return {"source": "scheduler", **live.model_dump(mode="json")}
    record = await _with_session(lambda s: get_task(s, task_id))
    if record is None:
        return None
    return {
        "source": "state store",
        "task_id": task_id,
        "task_type": record.task.task_type,
        "state": record.task.state,
        "current_step": record.task.current_step,
        "needs_operator": record.task.state == "Error",
        "steps": [
            {
                "name": s.name,
                "position": s.position,
                "state": s.state,
                "failure_count": s.failure_count,
                "runs": None,
                "last_error": s.last_error,
                "error_type": s.error_type,
            }
            for s in record.steps
        ],
        "events": [],
    }


def _print_status(data: dict[str, Any]) -> None:
    console.print(
        f"[bold]{data['task_id']}[/bold] ({data['task_type']}): {styled(data['state'])}"
        + (f", at step {data['current_step']}" if data.get("current_step") else "")
        + (" - [bold red]needs an operator[/bold red]" if data.get("needs_operator") else "")
    )
    console.print(
        table(
            None,
            ["#", "step", "state", "FailureCount", "runs", "last error"],
            [
                [
                    s["position"],
                    s["name"],
                    styled(s["state"]),
                    s["failure_count"],
                    s.get("runs") or "",
                    s.get("last_error") or "",
                ]
                for s in data["steps"]
            ],
        )
    )
    for event in data.get("events", [])[-10:]:
        console.print(f"  {event}")


async def _follow(task_id: str, as_json: bool) -> None:
    """Print each change of the task's state, steps and events until it ends."""
    import json as _json

    client = await _client()
    seen_events = 0
    last: tuple[Any, ...] | None = None
    while True:
        data = await _fetch_status(task_id, client)
        if data is None:
            if last is None:
                console.print(f"{task_id}: not started yet (or unknown); waiting")
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
                    steps = "  ".join(f"{s['name']}={styled(s['state'])}" for s in data["steps"])
                    console.print(f"{task_id}: {styled(data['state'])}  {steps}")
                last = shape
            for event in events[seen_events:]:
                if not as_json:
                    console.print(f"  {event}")
            seen_events = len(events)
            if data["state"] in ("Processed", "Compensated"):
                return
        await asyncio.sleep(1)


@app.command("list")
def list_tasks(
    state: str | None = typer.Option(None, help="Only tasks in this state (e.g. Error, Processing, Compensated)."),
    limit: int = typer.Option(50, min=1, max=10_000),
    as_json: bool = JSON,
) -> None:
    """List tasks from the state store, newest first."""
    from state_store.queries import failure_counts
    from state_store.queries import list_tasks as query
    from task_models import TaskState

    wanted = None
    if state is not None:
        by_name = {s.value.lower(): s.value for s in TaskState}
        wanted = by_name.get(state.lower())
        if wanted is None:
            raise CliError(f"unknown state {state!r}", f"use one of: {', '.join(by_name.values())}")

    async def load(session: Any) -> tuple[list[Any], dict[str, int]]:
        tasks = await query(session, wanted, limit)
        return tasks, await failure_counts(session, [t.task_id for t in tasks])

    rows, counts = _run(lambda: _with_session(load))
    if as_json:
        print_json(
            [
                {
                    "task_id": t.task_id,
                    "task_type": t.task_type,
                    "state": t.state,
                    "current_step": t.current_step,
                    "failure_count": counts.get(t.task_id, 0),
                    "updated_at": t.updated_at,
                }
                for t in rows
            ]
        )
        return
    console.print(
        table(
            f"{len(rows)} task(s)",
            ["task", "type", "state", "step", "FailureCount", "updated"],
            [
                [t.task_id, t.task_type, styled(t.state), t.current_step, counts.get(t.task_id, 0), ago(t.updated_at)]
                for t in rows
            ],
        )
    )


BY = typer.Option(None, help="Who is acting (default: $USER).")
REASON = typer.Option("", help="Why, for the record.")


def _operator_action(task_id: str, update: str, done: str, **request: Any) -> None:
    """Send an operator update and print its answer (or the rejection, as an error)."""
    from sas_cli import tasks
    from task_models import OperatorRequest

    tasks.check_task_id(task_id)
    request["by"] = request.get("by") or f"{os.environ.get('USER', 'operator')} (sas)"
    answer = _run(lambda: _update(task_id, update, OperatorRequest(**request)))
    console.print(f"{task_id}: {done}{answer.message}; follow it with `sas status {task_id} --follow`")


@app.command()
def retry(
    task_id: str,
    step: str | None = typer.Option(None, help="Step to retry (default: the one waiting)."),
    by: str | None = BY,
    reason: str = REASON,
) -> None:
    """Ask a task to re-run the step that waits for a decision."""
    _operator_action(task_id, "request_retry", "", step=step, by=by, reason=reason)


@app.command()
def resubmit(task_id: str, by: str | None = BY, reason: str = REASON) -> None:
    """Take a task out of the dead letter: reset its FailureCount and retry the waiting step."""
    _operator_action(task_id, "request_retry", "FailureCount reset; ", by=by, reason=reason, reset_failure_count=True)


@app.command()
def compensate(task_id: str, by: str | None = BY, reason: str = REASON) -> None:
    """Ask a task to undo its completed steps, in reverse order."""
    _operator_action(task_id, "request_compensate", "", by=by, reason=reason)


async def _update(task_id: str, name: str, request: Any) -> Any:
    from sas_cli import tasks

    return await tasks.update(await _client(), task_id, name, request)


# ------------------------------------------------------------------- alerts


@alerts_app.callback()
def alerts(
    ctx: typer.Context,
    status_filter: str | None = typer.Option("open", "--status", help="open | acked | resolved | all"),
    limit: int = typer.Option(100, min=1),
    as_json: bool = JSON,
) -> None:
    """List operator alerts (open ones by default)."""
    if ctx.invoked_subcommand is not None:
        return
    from state_store.alerts import ALERT_STATUSES, list_alerts

    if status_filter not in (*ALERT_STATUSES, "all"):
        raise CliError(f"unknown status {status_filter!r}", f"use one of: {', '.join(ALERT_STATUSES)}, all")
    wanted = None if status_filter == "all" else status_filter
    rows = _run(lambda: _with_session(lambda s: list_alerts(s, wanted, limit)))
    if as_json:
        print_json(
            [
                {
                    c: getattr(a, c)
                    for c in (
                        "id",
                        "severity",
                        "kind",
                        "task_id",
                        "step",
                        "failure_count",
                        "message",
                        "last_error",
                        "suggested_action",
                        "status",
                        "created_at",
                        "updated_at",
                    )
                }
                for a in rows
            ]
        )
        return
    console.print(
        table(
            f"{len(rows)} alert(s)",
            ["id", "severity", "task", "step", "FailureCount", "what", "do", "since", "status"],
            [
                [
                    a.id,
                    a.severity,
                    a.task_id,
                    a.step,
                    a.failure_count,
                    a.message,
                    a.suggested_action,
                    ago(a.created_at),
                    a.status,
                ]
                for a in rows
            ],
        )
    )


def _set_alert(alert_id: int, new_status: str) -> None:
    from datetime import UTC, datetime

    from state_store.alerts import set_alert_status

    found = _run(lambda: _with_session(lambda s: set_alert_status(s, alert_id, new_status, datetime.now(UTC))))
    if not found:
        raise CliError(f"no alert {alert_id}", "see the ids with `sas alerts --status all`")
    console.print(f"alert {alert_id}: {new_status}")


@alerts_app.command("ack")
def alerts_ack(alert_id: int) -> None:
    """Acknowledge an alert: someone is on it."""
    _set_alert(alert_id, "acked")


@alerts_app.command("resolve")
def alerts_resolve(alert_id: int) -> None:
    """Close an alert."""
    _set_alert(alert_id, "resolved")


# --------------------------------------------------------------- whole stack

from sas_cli import codec_server_cmd as _codec_server_cmd  # noqa: E402  (registers `codec-server`)
from sas_cli import demo as _demo  # noqa: E402  (registers `up` and `demo`)
from sas_cli import health_cmd as _health_cmd  # noqa: E402  (registers `health`)
from sas_cli import supervisor_cmds as _supervisor_cmds  # noqa: E402  (registers `show`)
from sas_cli.schedules import schedule_app  # noqa: E402

_demo.register(app)
_supervisor_cmds.register(app)
_codec_server_cmd.register(app)
_health_cmd.register(app)
app.add_typer(schedule_app, name="schedule")


def main() -> None:
    """Entry point of the ``sas`` script."""
    from sas_cli.runtime import exit_hard

    code = 0
    try:
        result = app(standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except CliError as err:
        err_console.print(f"[bold red]sas:[/bold red] {err.message}")
        if err.hint:
            err_console.print(f"  {err.hint}")
        code = err.code
    except click.exceptions.Exit as err:
        code = err.exit_code
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        code = 130
    exit_hard(code)


if __name__ == "__main__":
    main()
