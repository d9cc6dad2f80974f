"""``sas alerts``: the operator alerts the Supervisor raised - list, acknowledge, resolve."""

from __future__ import annotations

import typer

from sas.cli import context
from sas.cli.output import ago, console, print_json, shown, table

alerts_app = typer.Typer(help="Operator alerts: list, acknowledge, resolve.", invoke_without_command=True)
JSON = typer.Option(False, "--json", help="Print JSON instead of a table.")


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")


@alerts_app.callback()
def alerts(
    ctx: typer.Context,
    status_filter: str | None = typer.Option("open", "--status", help="open | acked | resolved | all"),
    limit: int = typer.Option(100, min=1),
    as_json: bool = JSON,
    with_folded: bool = typer.Option(
        False, "--folded", help="Also the alerts of tasks in an open incident (`sas incidents`), folded into it."
    ),
    team: str | None = typer.Option(None, help="Only the alerts this team owns (its task types' tasks)."),
) -> None:
    """List operator alerts (open ones by default); a task's alert folded into an incident is not listed."""
    if ctx.invoked_subcommand is not None:
        return
    found = context.call(lambda tasks: tasks.alerts(status_filter or "open", limit, folded=with_folded, team=team))
    rows, hidden = found.alerts, found.folded
    if as_json:
        print_json([a.data for a in rows])
        return
    wanted = None if status_filter == "all" else status_filter
    if not rows:
        folded = f" ({hidden} folded into incidents: `sas incidents`)" if hidden else ""
        console.print(f"no {'' if wanted is None else wanted + ' '}alerts{folded}")
        return
    console.print(
        table(
            f"{len(rows)} alert(s)",
            ["id", "task, step", "alert", "do", "status"],
            [
                [
                    a.id,
                    f"{a.task_id or '-'}\n{a.step or '-'}",
                    f"{a.severity}, incident of {a.failure_count} tasks: {a.message}"
                    if a.kind == "incident"
                    else f"{a.severity}, FailureCount {a.failure_count}: {a.message}",
                    a.suggested_action,
                    f"{a.status}\n{ago(a.created_at)}",
                ]
                for a in rows
            ],
            ids=(0, 1),
        )
    )
    if hidden:
        console.print(
            f"{hidden} alert(s) of tasks in open incidents are folded into them: `sas incidents`, or --folded"
        )


def _set_alert(alert_id: int, action: str, as_json: bool) -> None:
    """Ack or resolve by the alerts' state machine (docs/operator.md): a move it does not
    allow changes nothing, says so, and exits 0 - the alert is already where the operator
    wanted it or beyond. Only an unknown id is an error."""
    change = context.call(
        lambda tasks: tasks.acknowledge_alert(alert_id) if action == "ack" else tasks.resolve_alert(alert_id)
    )
    if as_json:
        print_json({"id": alert_id, "before": change.before, "status": change.after, "changed": change.changed})
    elif change.changed:
        console.print(f"alert {alert_id}: {shown(change.before)} -> {shown(change.after)}")
    else:
        console.print(f"alert {alert_id} is already {shown(change.after)}: {action} changes nothing")


@alerts_app.command("ack")
def alerts_ack(alert_id: int, as_json: bool = JSON) -> None:
    """Acknowledge an open alert: someone is on it (a resolved one stays resolved)."""
    _set_alert(alert_id, "ack", as_json)


@alerts_app.command("resolve")
def alerts_resolve(alert_id: int, as_json: bool = JSON) -> None:
    """Close an open or acknowledged alert."""
    _set_alert(alert_id, "resolve", as_json)
