"""``sas incidents``: one line per cause that fails many tasks at once (``supervisor/incidents.py``).

An incident is an alert (its id is the alert's: ``sas alerts ack ID`` acknowledges it) standing
for every task failing for one cause. ``sas retry|compensate|resubmit --incident ID`` acts on
exactly its tasks, through the bulk actions (``sas/cli/bulk.py``).
"""

from __future__ import annotations

from typing import Any

import typer

from sas.cli import context
from sas.cli.output import CliError, ago, command_line, console, print_json, shown, table

_STATUSES = ("open", "acked", "resolved", "active", "all")


def register(app: typer.Typer) -> None:
    app.command("incidents")(incidents)


def incidents(
    incident_id: int | None = typer.Argument(None, help="Show this incident and its tasks."),
    status_filter: str = typer.Option(
        "active", "--status", help="active (open or acked, the default) | open | acked | resolved | all"
    ),
    limit: int = typer.Option(100, min=1, max=1000, help="At most this many incidents (or tasks of one)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Open incidents: many tasks failing for one cause (service, step, error), one line each."""
    if status_filter not in _STATUSES:
        raise CliError(f"--status {status_filter!r}: unknown status", f"use one of: {', '.join(_STATUSES)}")
    if incident_id is not None:
        _one(incident_id, limit, as_json)
        return
    from sas.state_store.alerts import ACTIVE
    from sas.state_store.incidents import incident_view, list_incidents

    wanted = None if status_filter in ("all", "active") else status_filter

    async def load(session: Any) -> list[Any]:
        rows = await list_incidents(session, wanted, limit)
        return [r for r in rows if status_filter != "active" or r[0].status in ACTIVE]

    rows = context.run(lambda: context.with_read_session(load))
    if as_json:
        print_json([incident_view(a, i) for a, i in rows])
        return
    if not rows:
        console.print("no incidents" if status_filter == "all" else f"no {status_filter} incidents")
        return
    console.print(
        table(
            f"{len(rows)} incident(s)",
            ["id", "cause", "tasks", "since", "next look", "status"],
            [
                [
                    a.id,
                    f"{i.service or '-'} · {i.step}\n{i.error_type or 'error'}: {i.error_text}",
                    f"{i.task_count}" + (f"\n{i.parked} parked" if i.parked else ""),
                    f"{ago(i.first_at)}\nlatest {ago(i.latest_at)}",
                    ago(i.next_look_at),
                    f"{a.status}\n{a.severity}",
                ]
                for a, i in rows
            ],
        )
    )
    live = [a for a, _ in rows if a.status != "resolved"]
    if live:
        console.print("Its tasks, then act on exactly them (add --yes instead of --dry-run):")
        command_line(f"  sas incidents {live[0].id}")
        command_line(f"  sas retry --incident {live[0].id} --dry-run")


def _one(incident_id: int, limit: int, as_json: bool) -> None:
    from sas.state_store.incidents import get_incident, incident_task_ids, incident_view

    async def load(session: Any) -> tuple[Any, list[str]]:
        found = await get_incident(session, incident_id)
        return found, (await incident_task_ids(session, incident_id, limit) if found else [])

    found, members = context.run(lambda: context.with_read_session(load))
    if found is None:
        raise CliError(f"no incident {incident_id}", "see the ids with `sas incidents --status all`")
    alert, incident = found
    if as_json:
        print_json({**incident_view(alert, incident), "task_ids": members})
        return
    console.print(f"incident {alert.id} ({shown(alert.status)}, {shown(alert.severity)}): {shown(alert.message)}")
    if alert.resolution:
        console.print(f"resolved: {shown(alert.resolution)}")
    console.print(f"do: {shown(alert.suggested_action)}")
    if members:
        more = f" (the first {limit}; --limit for more)" if incident.task_count > len(members) else ""
        console.print(f"its {incident.task_count} task(s){more}:")
        for task_id in members:
            command_line(f"  {task_id}")
