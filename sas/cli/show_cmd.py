"""``sas show ID``: a task as the Supervisor sees it - steps, every decision, alerts."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, ago, console, print_json, shown, stands_at, styled, table


def register(app: typer.Typer) -> None:
    """Add the Supervisor's commands to ``app``."""
    app.command("show")(show)


# Where a step stands to its task type's point of no return (steps.pivot), beside its name.
_PIVOT_MARKS = {"pivot": " (pivot)", "forward_only": " (forward only)"}


def show(
    task_id: str = typer.Argument(..., help="Task id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
) -> None:
    """Show a task's steps, its attempts, decisions and operator actions in time order, and its alerts."""
    from sas.cli import tasks

    tasks.check_task_id(task_id)
    data = context.run(lambda: context.with_read_session(lambda session: task_history(session, task_id)))
    if data is None:
        from sas.cli import delayed
        from sas.client.status import scheduled

        later = context.run(lambda: context.with_client(lambda c: scheduled(c, task_id)))
        if later is not None and later["state"] != "Cancelled":  # a cancelled one: its audited actions below
            delayed.report(later, as_json)
            return
        if _show_actions_only(task_id, as_json):
            return
        if _show_unaccepted(task_id, as_json):
            return
        raise CliError(f"no task {task_id!r} in the state store", "check the id with `sas list`")
    if as_json:
        print_json(data)
        return
    task = data["task"]
    console.print(
        f"[bold]{shown(task_id)}[/bold] ({shown(task['task_type'])}): {styled(task['state'])}"
        + shown(stands_at(task["state"], data["steps"], task["current_step"]))
        + f", queue {shown(task['task_queue'])}, updated {ago(task['updated_at'])}"
    )
    _print_family(data)
    # Few, short columns, so the table fits 80 columns without breaking a state in two.
    console.print(
        table(
            "steps",
            ["step", "state", "FailureCount", "attempt", "LockedBy, CompleteBy", "last error or note"],
            [
                [
                    s["name"] + _PIVOT_MARKS.get(s.get("pivot") or "", ""),
                    styled(s["state"]),
                    s["failure_count"],
                    s["attempt"],
                    f"{s['locked_by']}, {ago(s['complete_by'])}" if s["locked_by"] else "",
                    s["last_error"] or s.get("note") or "",
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
            f"history: {len(data['attempts'])} attempt(s), {len(data['decisions'])} decision(s),"
            f" {len(data['operator_actions'])} operator action(s)",
            ["when", "step", "what", "who", "detail"],
            [
                [e["at"].strftime("%m-%d %H:%M:%S"), e["step"], e["what"], e["who"], e["detail"]]
                for e in data["history"]
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
            ["id", "alert", "do", "status"],
            [
                [
                    a["id"],
                    f"{a['severity']} {a['kind']} at {a['step'] or '-'}, FailureCount {a['failure_count']}:"
                    f" {a['message']}",
                    a["suggested_action"],
                    f"{a['status']}, {ago(a['created_at'])}" + (f" ({a['resolution']})" if a["resolution"] else ""),
                ]
                for a in data["alerts"]
            ],
        )
    )


def _print_family(data: dict[str, Any]) -> None:
    """The parent this task is a child of, and its own child tasks, each with its step."""
    parent = data["parent"]
    if parent is not None:
        console.print(f"child of {shown(parent['task_id'])} (its step {shown(parent['step'])})")
    for child in data["children"]:
        console.print(
            f"child task {shown(child['task_id'])} ({shown(child['task_type'])}) of step"
            f" {shown(child['step'])}: {styled(child['state'])}"
        )


def _show_unaccepted(task_id: str, as_json: bool) -> bool:
    """A task whose run failed before sas accepted it (its input refused): Temporal's story of it.
    False if Temporal has no such failed run."""
    from sas.cli.unaccepted import report
    from sas.client.status import closed_before_accepted

    data = context.run(lambda: context.with_client(lambda c: closed_before_accepted(c, task_id)))
    if data is None or data["state"] != "Failed":
        return False
    if as_json:
        print_json({**data, "task": None, "operator_actions": []})
    else:
        report(data)
    return True


def _show_actions_only(task_id: str, as_json: bool) -> bool:
    """A task that never ran (a delayed task cancelled before its start) or a cancelled
    schedule has no rows, only its audit entries: show those. False if there are none."""
    from sas.state_store.queries import audit_for

    entries = context.run(lambda: context.with_read_session(lambda s: audit_for(s, task_id)))
    if not entries:
        return False
    actions = [
        {c: getattr(e, c) for c in ("at", "step", "action", "actor", "reason", "changed")}
        for e in sorted(entries, key=lambda e: e.at)
    ]
    if as_json:
        print_json({"task_id": task_id, "task": None, "operator_actions": actions})
        return True
    console.print(f"[bold]{shown(task_id)}[/bold]: never ran, so it has no rows; its operator actions:")
    console.print(
        table(
            None,
            ["when", "action", "who", "what changed"],
            [
                [a["at"].strftime("%m-%d %H:%M:%S"), a["action"], a["actor"], a["changed"] + _why(a["reason"])]
                for a in actions
            ],
        )
    )
    return True


def _why(reason: str) -> str:
    return f" ({reason})" if reason else ""


async def task_history(session: Any, task_id: str) -> dict[str, Any] | None:
    """Everything ``sas show`` prints, as plain data (``--json``), with ``history``: the
    attempts, decisions and operator actions merged in time order."""
    data = await _task_data(session, task_id)
    if data is not None:
        data["history"] = _history(data)
    return data


async def _attempts_for(session: Any, task_id: str) -> list[Any]:
    from sqlalchemy import select

    from sas.state_store.tables import StepAttempt

    query = select(StepAttempt).where(StepAttempt.task_id == task_id).order_by(StepAttempt.started_at, StepAttempt.id)
    return list((await session.scalars(query)).all())


def _history(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One time line: each attempt (who held it, until when), decision and operator action."""
    from sas.task_models import StepState

    events: list[dict[str, Any]] = []
    for a in data["attempts"]:
        undo = a["state"] == StepState.COMPENSATING
        until = a["complete_by"].strftime("%H:%M:%S") if a["complete_by"] else "?"
        events.append(
            {
                "at": a["started_at"],
                "step": a["step"],
                "what": f"{'undo ' if undo else ''}attempt {a['attempt']}",
                "who": a["locked_by"],
                "detail": f"CompleteBy {until}, FailureCount {a['failure_count']}",
            }
        )
    for d in data["decisions"]:
        sent = "sent" if d["signal_sent_at"] else "pending"
        events.append(
            {
                "at": d["decided_at"],
                "step": d["step"],
                "what": f"decision: {d['kind']}",
                "who": d["decided_by"],
                "detail": f"FailureCount {d['failure_count']}, saw {d['observed_state']}, {sent}: {d['reason']}",
            }
        )
    for e in data["operator_actions"]:
        events.append(
            {
                "at": e["at"],
                "step": e["step"],
                "what": f"operator: {e['action']}",
                "who": e["actor"],
                "detail": e["changed"] + (f" ({e['reason']})" if e["reason"] else ""),
            }
        )
    return sorted(events, key=lambda e: e["at"])


async def _task_data(session: Any, task_id: str) -> dict[str, Any] | None:
    from sas.state_store.queries import (
        alerts_for,
        archived_incarnations,
        audit_for,
        children_of,
        decisions_for,
        get_task,
    )

    record = await get_task(session, task_id)
    if record is None:
        return None
    t = record.task
    return {
        # A child task's parent, and the child tasks of this one's child steps (ChildTask).
        "parent": {"task_id": t.parent_task_id, "step": t.parent_step} if t.parent_task_id else None,
        "children": [
            {"task_id": c.task_id, "step": c.parent_step, "task_type": c.task_type, "state": c.state}
            for c in await children_of(session, task_id)
        ],
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
                    "note",
                    "pivot",
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
            for e in sorted(await audit_for(session, task_id), key=lambda e: e.at)  # sas's own entries have seq 0
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
        "attempts": [
            {
                c: getattr(a, c)
                for c in (
                    "step",
                    "state",
                    "attempt",
                    "failure_count",
                    "locked_by",
                    "complete_by",
                    "started_at",
                    "chain_id",
                )
            }
            for a in await _attempts_for(session, task_id)
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
