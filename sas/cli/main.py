"""The ``sas`` command: run the parts, submit and inspect tasks, act as an operator."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import click
import typer
from rich.markup import escape
from temporalio.service import RPCError
from typer._click.exceptions import ClickException as TyperClickException  # not re-exported by typer

from sas.cli import bulk, bulk_selection, context
from sas.cli.output import CliError, ago, console, duration, err_console, print_json, styled, table

app = typer.Typer(
    name="sas",
    help="Scheduler Agent Supervisor on Temporal: tasks that complete or are undone as a whole.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
alerts_app = typer.Typer(help="Operator alerts: list, acknowledge, resolve.", invoke_without_command=True)
app.add_typer(alerts_app, name="alerts")

JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")
# `sas list`'s name for a workflow stuck in workflow task failures before the mirror saw it.
STUCK = "Stuck"


@app.callback()
def options(
    debug: bool = typer.Option(False, "--debug", help="On failure, print the traceback as well as the one-line error."),
) -> None:
    """Scheduler Agent Supervisor on Temporal: tasks that complete or are undone as a whole."""
    context.DEBUG = debug


# ---------------------------------------------------------------- processes


@app.command()
def migrate() -> None:
    """Create or upgrade the state store's tables (SAS_DATABASE__URL)."""
    from sas import state_store
    from sas.runtime.failures import mask_url, reaching_state_store

    url = context.settings().database.url
    with reaching_state_store(url):
        state_store.upgrade(url)
    console.print(f"state store at {escape(mask_url(url))} is up to date")


@app.command()
def setup() -> None:
    """Register sas's search attributes in the Temporal namespace (once per cluster)."""
    from sas.runtime.search_attributes import register_search_attributes

    added = context.run(lambda: context.with_client(register_search_attributes))
    console.print(f"search attributes: {escape(', '.join(added)) or 'all already registered'}")


@app.command()
def worker() -> None:
    """Run the Scheduler + Agents worker (same as `python worker.py`)."""
    from sas.runtime.entry import run_entry
    from sas.worker import run_worker

    run_entry(run_worker, debug=context.DEBUG)


@app.command()
def supervisor() -> None:
    """Run a Supervisor worker (same as `python -m sas.supervisor`)."""
    from sas.runtime.entry import run_entry
    from sas.supervisor.worker import run_supervisor

    run_entry(run_supervisor, debug=context.DEBUG)


@app.command()
def services(
    port: int = typer.Option(8081, help="Port to listen on."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    ledger: Path = typer.Option(Path(".sas/ledger.db"), help="SQLite file of the ledger."),
    enable_faults: bool = typer.Option(False, "--enable-faults", help="Turn on the fault-injection admin API."),
) -> None:
    """Run the remote services (inventory, payment, shipping) the Agents call."""
    import sys

    args = [sys.executable, "-m", "sas.remote_services", "--host", host, "--port", str(port), "--ledger", str(ledger)]
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
    priority: int | None = typer.Option(
        None, "--priority", help="1 (most urgent) to 5: a backlog hands out urgent tasks first. Default: 3."
    ),
    as_json: bool = JSON,
) -> None:
    """Submit a task. Example: sas submit --sku BOOK-1 --quantity 1 --amount-cents 1299 --customer c1 --address '1 Main St'"""
    from sas.cli import tasks

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
    urgency = tasks.check_priority(priority)

    async def go() -> dict[str, Any]:
        client = await context.client()
        created = await tasks.submit(
            client, context.settings(), task_type, task_id, payload, start_delay=delay, priority=urgency
        )
        if not created:
            # A task id is one task: a script must see that nothing new started.
            raise await tasks.existing_task(client, task_id)
        out: dict[str, Any] = {"task_id": task_id, "submitted": created}
        if delay is not None:
            out["starts_in_s"] = round(delay.total_seconds(), 1)
        if wait:
            from sas.task_models import TaskResult

            out["result"] = (await client.get_workflow_handle(task_id, result_type=TaskResult).result()).model_dump(
                mode="json"
            )
        return out

    out = context.run(go)
    if as_json:
        print_json(out)
        return
    when = f", starting in {duration(out['starts_in_s'])}" if delay is not None else ""
    shown = escape(task_id)
    console.print(f"submitted {escape(task_type)} [bold]{shown}[/bold]{when}; follow it with `sas status {shown}`")
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
    from sas.cli import tasks

    tasks.check_task_id(task_id)
    if follow:
        context.run(lambda: _follow(task_id, as_json))
        return
    data = context.run(lambda: _fetch_status(task_id))
    if data is None:
        from sas.cli import delayed

        later = context.run(lambda: context.with_client(lambda c: delayed.scheduled(c, task_id)))
        if later is not None:
            delayed.report(later, as_json)
            return
        raise CliError(f"no task {task_id!r}", "check the id with `sas list`")
    if as_json:
        print_json(data)
        return
    _print_status(data)


async def _fetch_status(task_id: str, client: Any = None) -> dict[str, Any] | None:
    from sas.cli import tasks
    from sas.state_store.queries import get_task

    try:
        live = await tasks.query_status(client or await context.client(), task_id)
    except RPCError:
        live = None  # no worker to answer, or not started yet: the state store still knows
    if live is not None and live.steps:
        return {"source": "scheduler", **live.model_dump(mode="json")}
    record = await context.with_session(lambda s: get_task(s, task_id))
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
        f"[bold]{escape(data['task_id'])}[/bold] ({escape(data['task_type'])}): {styled(data['state'])}"
        + (f", at step {escape(data['current_step'])}" if data.get("current_step") else "")
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
        console.print(f"  {escape(str(event))}")


async def _follow(task_id: str, as_json: bool) -> None:
    """Print each change of the task's state, steps and events until it ends."""
    import json as _json

    client = await context.client()
    seen_events = 0
    last: tuple[Any, ...] | None = None
    while True:
        data = await _fetch_status(task_id, client)
        if data is None:
            if last is None:
                console.print(f"{escape(task_id)}: not started yet (or unknown); waiting")
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
                    steps = "  ".join(f"{escape(s['name'])}={styled(s['state'])}" for s in data["steps"])
                    console.print(f"{escape(task_id)}: {styled(data['state'])}  {steps}")
                last = shape
            for event in events[seen_events:]:
                if not as_json:
                    console.print(f"  {escape(str(event))}")
            seen_events = len(events)
            if data["state"] in ("Processed", "Compensated"):
                return
        await asyncio.sleep(1)


@app.command("list")
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
            raise CliError(f"unknown state {state!r}", f"use one of: {', '.join(by_name.values())}")

    async def load(session: Any) -> tuple[list[Any], dict[str, int], list[Any]]:
        # A workflow stuck in workflow task failures before its first write has no row: the
        # Supervisor's workflow_stuck alert (from TemporalReportedProblems) is how it is known.
        stuck = await stuck_before_the_mirror(session, limit) if wanted in (None, STUCK) else []
        tasks = await query(session, wanted, limit) if wanted != STUCK else []
        return tasks, await failure_counts(session, [t.task_id for t in tasks]), stuck

    rows, counts, stuck = context.run(lambda: context.with_session(load))
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


BY = typer.Option(None, help="Who is acting (default: $USER).")
REASON = typer.Option("", help="Why, for the record.")


def _operator_action(task_id: str, update: str, done: str, **request: Any) -> None:
    """Send an operator update and print its answer (or the rejection, as an error)."""
    from sas.cli import tasks
    from sas.task_models import OperatorRequest

    tasks.check_task_id(task_id)
    request["by"] = request.get("by") or f"{os.environ.get('USER', 'operator')} (sas)"
    answer = context.run(lambda: _update(task_id, update, OperatorRequest(**request)))
    shown = escape(task_id)
    console.print(f"{shown}: {done}{escape(answer.message)}; follow it with `sas status {shown} --follow`")


# Bulk actions (sas/cli/bulk.py): no task id, a selection instead; --dry-run lists, --yes acts.
TASK_ID = typer.Argument(None, help="Task id; or none, and select tasks with the options below.")


@app.command()
def retry(
    task_id: str | None = TASK_ID,
    step: str | None = typer.Option(None, help="Step to retry (default: the one waiting); or select tasks at it."),
    by: str | None = BY,
    reason: str = REASON,
    state: list[str] | None = bulk_selection.STATE,
    since: str | None = bulk_selection.SINCE,
    task_type: str | None = bulk_selection.TASK_TYPE,
    query: str | None = bulk_selection.QUERY,
    limit: int = bulk_selection.LIMIT,
    concurrency: int = bulk.CONCURRENCY,
    dry_run: bool = bulk.DRY_RUN,
    yes: bool = bulk.YES,
    as_json: bool = bulk.JSON,
) -> None:
    """Ask a task (or a selection) to re-run the step that waits for a decision (or was parked by `sas park`)."""
    from sas.cli import audit, park, tasks

    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json)
    if task_id is None:
        raise typer.Exit(bulk.run("retry", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags, step_is_single=True)
    tasks.check_task_id(task_id)
    # A step parked by pausing its activity (Temporal shows it paused): unpause it. Anything
    # else goes to the Scheduler, which accepts or rejects it with the reason.
    unparked = context.run(lambda: park.unpark(task_id, step, audit.actor(by), reason))
    if unparked is not None:
        shown = escape(task_id)
        console.print(f"{shown}: {escape(unparked)}; follow it with `sas status {shown} --follow`")
        return
    _operator_action(task_id, "request_retry", "", step=step, by=by, reason=reason)


@app.command()
def resubmit(
    task_id: str | None = TASK_ID,
    by: str | None = BY,
    reason: str = REASON,
    state: list[str] | None = bulk_selection.STATE,
    step: str | None = bulk_selection.STEP,
    since: str | None = bulk_selection.SINCE,
    task_type: str | None = bulk_selection.TASK_TYPE,
    query: str | None = bulk_selection.QUERY,
    limit: int = bulk_selection.LIMIT,
    concurrency: int = bulk.CONCURRENCY,
    dry_run: bool = bulk.DRY_RUN,
    yes: bool = bulk.YES,
    as_json: bool = bulk.JSON,
) -> None:
    """Run a task (or a selection) again: a parked one with FailureCount 0, a finished one as a new incarnation."""
    from sas.cli import tasks

    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json)
    if task_id is None:
        raise typer.Exit(bulk.run("resubmit", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags)
    tasks.check_task_id(task_id)

    async def still_running() -> bool:
        return await tasks.workflow_status(await context.client(), task_id) == "RUNNING"

    if context.run(still_running):
        _operator_action(
            task_id, "request_retry", "FailureCount reset; ", by=by, reason=reason, reset_failure_count=True
        )
        return
    actor = by or f"{os.environ.get('USER', 'operator')} (sas)"
    incarnation = context.run(lambda: context.with_client(lambda c: tasks.resubmit_finished(c, task_id, actor, reason)))
    shown = escape(task_id)
    console.print(
        f"{shown}: resubmitted as incarnation {incarnation}, with new idempotency keys; "
        f"follow it with `sas status {shown} --follow`"
    )


@app.command()
def compensate(
    task_id: str | None = TASK_ID,
    by: str | None = BY,
    reason: str = REASON,
    state: list[str] | None = bulk_selection.STATE,
    step: str | None = bulk_selection.STEP,
    since: str | None = bulk_selection.SINCE,
    task_type: str | None = bulk_selection.TASK_TYPE,
    query: str | None = bulk_selection.QUERY,
    limit: int = bulk_selection.LIMIT,
    concurrency: int = bulk.CONCURRENCY,
    dry_run: bool = bulk.DRY_RUN,
    yes: bool = bulk.YES,
    as_json: bool = bulk.JSON,
) -> None:
    """Ask a task (or a selection) to undo its completed steps, in reverse order."""
    flags = bulk.Flags(state, step, since, task_type, query, limit, concurrency, dry_run, yes, as_json)
    if task_id is None:
        raise typer.Exit(bulk.run("compensate", flags, by=by, reason=reason))
    bulk.refuse_selection_with_id(flags)
    _operator_action(task_id, "request_compensate", "", by=by, reason=reason)


async def _update(task_id: str, name: str, request: Any) -> Any:
    from sas.cli import tasks

    return await tasks.update(await context.client(), task_id, name, request)


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
    from sas.state_store.alerts import ALERT_STATUSES, list_alerts

    if status_filter not in (*ALERT_STATUSES, "all"):
        raise CliError(f"unknown status {status_filter!r}", f"use one of: {', '.join(ALERT_STATUSES)}, all")
    wanted = None if status_filter == "all" else status_filter
    rows = context.run(lambda: context.with_session(lambda s: list_alerts(s, wanted, limit)))
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
            ["id", "task, step", "alert", "do", "status"],
            [
                [
                    a.id,
                    f"{a.task_id or '-'}\n{a.step or '-'}",
                    f"{a.severity}, FailureCount {a.failure_count}: {a.message}",
                    a.suggested_action,
                    f"{a.status}\n{ago(a.created_at)}",
                ]
                for a in rows
            ],
        )
    )


def _set_alert(alert_id: int, action: str, as_json: bool) -> None:
    """Ack or resolve by the alerts' state machine (docs/operator.md): a move it does not
    allow changes nothing, says so, and exits 0 - the alert is already where the operator
    wanted it or beyond. Only an unknown id is an error."""
    from datetime import UTC, datetime

    from sas.state_store.alerts import set_alert_status

    change = context.run(
        lambda: context.with_session(lambda s: set_alert_status(s, alert_id, action, datetime.now(UTC)))
    )
    if change.before is None:
        raise CliError(f"no alert {alert_id}", "see the ids with `sas alerts --status all`")
    if as_json:
        print_json({"id": alert_id, "before": change.before, "status": change.after, "changed": change.changed})
    elif change.changed:
        console.print(f"alert {alert_id}: {change.before} -> {change.after}")
    else:
        console.print(f"alert {alert_id} is already {change.after}: {action} changes nothing")


@alerts_app.command("ack")
def alerts_ack(alert_id: int, as_json: bool = JSON) -> None:
    """Acknowledge an open alert: someone is on it (a resolved one stays resolved)."""
    _set_alert(alert_id, "ack", as_json)


@alerts_app.command("resolve")
def alerts_resolve(alert_id: int, as_json: bool = JSON) -> None:
    """Close an open or acknowledged alert."""
    _set_alert(alert_id, "resolve", as_json)


# --------------------------------------------------------------- whole stack

from sas.cli import codec_server_cmd as _codec_server_cmd  # noqa: E402  (registers `codec-server`)
from sas.cli import delayed_control as _delayed_control  # noqa: E402  (registers `cancel`, `reschedule`)
from sas.cli import demo as _demo  # noqa: E402  (registers `up` and `demo`)
from sas.cli import health_cmd as _health_cmd  # noqa: E402  (registers `health`)
from sas.cli import park as _park  # noqa: E402  (registers `park`)
from sas.cli import reconcile_cmd as _reconcile_cmd  # noqa: E402  (registers `reconcile`)
from sas.cli import supervisor_cmds as _supervisor_cmds  # noqa: E402  (registers `show`)
from sas.cli.schedules import schedule_app  # noqa: E402

_demo.register(app)
_supervisor_cmds.register(app)
_codec_server_cmd.register(app)
_health_cmd.register(app)
_reconcile_cmd.register(app)
_delayed_control.register(app)
_park.register(app)
app.add_typer(schedule_app, name="schedule")


def main() -> None:
    """Entry point of the ``sas`` script."""
    from sas.runtime.entry import exit_hard
    from sas.runtime.failures import DependencyUnreachable

    code = 0
    try:
        result = app(standalone_mode=False)
        code = result if isinstance(result, int) else 0
    except CliError as err:
        _print_error(err.message, err.hint)
        code = err.code
    except DependencyUnreachable as err:
        # Temporal or the state store cannot be reached or turned us away: one line says which and why.
        _print_error(str(err), err.hint)
        code = 1
    except (click.exceptions.Exit, typer.Exit) as err:
        code = err.exit_code
    except (click.ClickException, TyperClickException) as err:
        # typer parses with its own copy of click: its usage and range errors are shown the same way.
        err.show()
        code = err.exit_code
    except (click.exceptions.Abort, typer.Abort, KeyboardInterrupt):
        code = 130
    except Exception as err:  # noqa: BLE001 - anything else still ends in one line, not a wall of traceback
        _print_error(f"unexpected {type(err).__name__}: {err}", "run again with `sas --debug ...` for the traceback")
        code = 1
    exit_hard(code)


def _print_error(message: str, hint: str | None) -> None:
    """`sas: <message>` and the hint, escaped: both may carry user data (ids, reasons, paths)."""
    if context.DEBUG:
        import traceback

        traceback.print_exc()
    err_console.print(f"[bold red]sas:[/bold red] {escape(message)}")
    if hint:
        err_console.print(f"  {escape(hint)}")


if __name__ == "__main__":
    main()
