"""``sas show ID``: a task as the Supervisor sees it - steps, every decision, alerts."""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import ago, console, print_json, shown, stands_at, styled, table

# The story's own home is the task client; tests and benchmarks that read it from a session of
# their own still find it here.
from sas.client.story import task_history as task_history


def register(app: typer.Typer) -> None:
    """Add the Supervisor's commands to ``app``."""
    app.command("show")(show)


# Where a step stands to its task type's point of no return (steps.pivot), beside its name.
_PIVOT_MARKS = {"pivot": " (pivot)", "forward_only": " (forward only)"}


def show(
    task_id: str = typer.Argument(..., help="Task id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of tables."),
    share: bool = typer.Option(
        False, "--share", help="Also ask Temporal for the run's priority, team, fairness key and weight."
    ),
) -> None:
    """Show a task's steps, its attempts, decisions and operator actions in time order, and its alerts."""
    story = context.call(lambda tasks: _told(tasks, task_id, share))
    if as_json:
        print_json(story.data)
    elif story.told == "delayed":
        from sas.cli import delayed

        delayed.report(story.data, as_json)
    elif story.told == "unaccepted":
        from sas.cli.unaccepted import report

        report(story.data)
    elif story.told == "actions":
        _print_actions_only(task_id, story.operator_actions)
    else:
        _print_story(task_id, story.data)


async def _told(tasks: Any, task_id: str, share: bool) -> Any:
    """The story from the state store; with ``share``, Temporal's word on the run's share too
    (only then is Temporal's SDK loaded: ``sas show`` alone starts fast)."""
    story = await tasks.show(task_id)
    if not share:
        return story
    from sas.client.story import with_share

    return await with_share(story, tasks._temporal)


def _print_story(task_id: str, data: dict[str, Any]) -> None:
    task = data["task"]
    console.print(
        f"[bold]{shown(task_id)}[/bold] ({shown(task['task_type'])}): {styled(task['state'])}"
        + shown(stands_at(task["state"], data["steps"], task["current_step"]))
        + f", queue {shown(task['task_queue'])}, updated {ago(task['updated_at'])}"
    )
    if "share" in data:
        _print_share(data["share"])
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


def _print_share(share: dict[str, Any] | None) -> None:
    """The run's priority and, when its type names a team or a tenant, its share of a backlog."""
    if share is None:
        console.print("priority: Temporal could not say (see `sas status`)")
        return
    line = f"priority {share['priority']}"
    if share["fairness_key"] is not None:
        weight = share["weight"] if share["weight"] is not None else "1 (default)"
        team = f"team {shown(share['team'])}, " if share["team"] else ""
        line += f", {team}fairness key {shown(share['fairness_key'])}, weight {weight}"
    console.print(line, highlight=False)


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


def _print_actions_only(task_id: str, actions: list[dict[str, Any]]) -> None:
    """A task that never ran (a delayed task cancelled before its start) or a cancelled
    schedule has no rows, only its audit entries."""
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


def _why(reason: str) -> str:
    return f" ({reason})" if reason else ""
