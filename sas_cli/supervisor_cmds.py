"""``sas show ID``: a task as the Supervisor sees it - steps, every decision, alerts."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from sas_cli import context
from sas_cli.output import CliError, ago, console, print_json, styled, table


def register(app: typer.Typer) -> None:
    """Add the Supervisor's commands to ``app``."""
    app.command("show")(show)


def show(
    task_id: str = typer.Argument(..., help="Task id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Show a task's steps, the Supervisor's decision history (who, when, why, FailureCount) and its alerts."""
    from sas_cli import tasks

    tasks.check_task_id(task_id)
    data = context.run(lambda: context.with_session(lambda session: task_history(session, task_id)))
    if data is None:
        from sas_cli import delayed

        later = context.run(lambda: context.with_client(lambda c: delayed.scheduled(c, task_id)))
        if later is not None:
            delayed.report(later, as_json)
            return
        raise CliError(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    if as_json:
        print_json(data)
        return
    task = data["task"]
    console.print(
        f"[bold]{escape(task_id)}[/bold] ({escape(task['task_type'])}): {styled(task['state'])}"
        + (f", at step {escape(task['current_step'])}" if task["current_step"] else "")
        + f", queue {escape(task['task_queue'])}, updated {ago(task['updated_at'])}"
    )
    console.print(
        table(
            "steps",
            ["#", "step", "state", "FailureCount", "attempt", "CompleteBy", "LockedBy", "last error"],
            [
                [
                    s["position"],
                    s["name"],
                    styled(s["state"]),
                    s["failure_count"],
                    s["attempt"],
                    ago(s["complete_by"]),
                    s["locked_by"],
                    s["last_error"],
                ]
                for s in data["steps"]
            ],
        )
    )
    results = [s for s in data["steps"] if s["result"]]
    if results:
        # What each step got back from its service (secret fields are never stored).
        console.print(
            table(
                "results",
                ["step", "result"],
                [[s["name"], ", ".join(f"{k}={v}" for k, v in s["result"].items())] for s in results],
            )
        )
    console.print(
        table(
            f"{len(data['decisions'])} decision(s)",
            ["when", "step", "decision", "FailureCount", "seen", "by", "why", "sent"],
            [
                [
                    d["decided_at"].isoformat(timespec="seconds"),
                    d["step"],
                    d["kind"],
                    d["failure_count"],
                    d["observed_state"],
                    d["decided_by"],
                    d["reason"],
                    "yes" if d["signal_sent_at"] else "pending",
                ]
                for d in data["decisions"]
            ],
        )
    )
    if data["operator_actions"]:
        console.print(
            table(
                "operator actions",
                ["when", "step", "action", "who", "why", "what changed"],
                [
                    [
                        e["at"].isoformat(timespec="seconds"),
                        e["step"],
                        e["action"],
                        e["actor"],
                        e["reason"],
                        e["changed"],
                    ]
                    for e in data["operator_actions"]
                ],
            )
        )
    if data["archived_incarnations"]:
        console.print(
            table(
                "earlier incarnations (archived by `sas resubmit`)",
                ["#", "ended", "steps", "archived"],
                [
                    [
                        a["incarnation"],
                        styled(a["state"]),
                        " ".join(f"{name}={state}" for name, state in a["steps"].items()),
                        a["archived_at"].isoformat(timespec="seconds"),
                    ]
                    for a in data["archived_incarnations"]
                ],
            )
        )
    console.print(
        table(
            f"{len(data['alerts'])} alert(s)",
            ["id", "severity", "kind", "step", "FailureCount", "what", "do", "status", "since"],
            [
                [
                    a["id"],
                    a["severity"],
                    a["kind"],
                    a["step"],
                    a["failure_count"],
                    a["message"],
                    a["suggested_action"],
                    a["status"] + (f" ({a['resolution']})" if a["resolution"] else ""),
                    ago(a["created_at"]),
                ]
                for a in data["alerts"]
            ],
        )
    )


async def task_history(session: Any, task_id: str) -> dict[str, Any] | None:
    """Everything ``sas show`` prints, as plain data (``--json``)."""
    from state_store.queries import alerts_for, archived_incarnations, audit_for, decisions_for, get_task

    record = await get_task(session, task_id)
    if record is None:
        return None
    t = record.task
    return {
        "task": {
            c: getattr(t, c)
            for c in (
                "task_id",
                "task_type",
                "workflow_type",
                "task_queue",
                "state",
                "current_step",
                "incarnation",
                "created_at",
                "updated_at",
            )
        },
        "steps": [
            {
                c: getattr(s, c)
                for c in (
                    "name",
                    "position",
                    "state",
                    "failure_count",
                    "attempt",
                    "complete_by",
                    "locked_by",
                    "last_error",
                    "error_type",
                    "permanent",
                    "idempotency_key",
                    "result",
                )
            }
            for s in record.steps
        ],
        "decisions": [
            {
                c: getattr(d, c)
                for c in (
                    "id",
                    "step",
                    "kind",
                    "failure_count",
                    "observed_state",
                    "reason",
                    "decided_by",
                    "decided_at",
                    "signal_sent_at",
                )
            }
            for d in await decisions_for(session, task_id)
        ],
        "operator_actions": [
            {c: getattr(e, c) for c in ("at", "step", "action", "actor", "reason", "changed")}
            for e in await audit_for(session, task_id)
        ],
        "alerts": [
            {
                c: getattr(a, c)
                for c in (
                    "id",
                    "severity",
                    "kind",
                    "step",
                    "failure_count",
                    "message",
                    "last_error",
                    "suggested_action",
                    "status",
                    "resolution",
                    "created_at",
                    "resolved_at",
                    "delivered_at",
                )
            }
            for a in await alerts_for(session, task_id)
        ],
        "archived_incarnations": [
            {
                "incarnation": a.incarnation,
                "state": a.state,
                "chain_id": a.chain_id,
                "archived_at": a.archived_at,
                "steps": {
                    s["name"]: s["state"] for s in sorted(a.snapshot.get("steps", []), key=lambda s: s["position"])
                },
            }
            for a in await archived_incarnations(session, task_id)
        ],
    }
