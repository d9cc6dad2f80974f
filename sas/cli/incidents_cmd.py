"""``sas incidents``: one line per cause that fails many tasks at once (``supervisor/alert/incident_check.py``).

An incident is an alert (its id is the alert's: ``sas alerts ack ID`` acknowledges it) standing
for every task failing for one cause. ``sas retry|compensate|resubmit --incident ID`` acts on
exactly its tasks, through the bulk actions (``sas/cli/bulk.py``). The task client reads them
(``TaskClient.incidents``, ``TaskClient.incident``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from sas.cli import context
from sas.cli.output import ago, command_line, console, print_json, shown, table

if TYPE_CHECKING:
    from sas.client.incidents import IncidentView


def register(app: typer.Typer) -> None:
    app.command("incidents")(incidents)


def incidents(
    incident_id: int | None = typer.Argument(None, help="Show this incident and its tasks."),
    status_filter: str = typer.Option(
        "active", "--status", help="active (open or acked, the default) | open | acked | resolved | all"
    ),
    limit: int = typer.Option(100, min=1, max=1000, help="At most this many incidents (or tasks of one)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    team: str | None = typer.Option(None, help="Only the incidents with a task of this team's types."),
) -> None:
    """Open incidents: many tasks failing for one cause (service, step, error), one line each."""
    if incident_id is not None:
        _one(context.call(lambda tasks: tasks.incident(incident_id, limit)), limit, as_json)
        return
    rows = context.call(lambda tasks: tasks.incidents(status_filter, limit, team=team))
    if as_json:
        print_json([i.data for i in rows])
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
                    i.id,
                    f"{i.service or '-'} · {i.step}\n{i.error_type or 'error'}: {i.error}",
                    f"{i.task_count}" + (f"\n{i.parked} parked" if i.parked else ""),
                    f"{ago(i.first_at)}\nlatest {ago(i.latest_at)}",
                    ago(i.next_look_at),
                    f"{i.status}\n{i.severity}" + (f"\n{i.release}" if i.release else ""),
                ]
                for i in rows
            ],
        )
    )
    live = [i for i in rows if i.status != "resolved"]
    if live:
        console.print("Its tasks, then act on exactly them (add --yes instead of --dry-run):")
        command_line(f"  sas incidents {live[0].id}")
        command_line(f"  sas retry --incident {live[0].id} --dry-run")


def _one(incident: IncidentView, limit: int, as_json: bool) -> None:
    if as_json:
        print_json({**incident.data, "task_ids": incident.task_ids})
        return
    console.print(
        f"incident {incident.id} ({shown(incident.status)}, {shown(incident.severity)}): {shown(incident.message)}"
    )
    if incident.release:
        console.print(f"its service: {shown(incident.release)}")
    if incident.resolution:
        console.print(f"resolved: {shown(incident.resolution)}")
    console.print(f"do: {shown(incident.suggested_action)}")
    if incident.task_ids:
        more = f" (the first {limit}; --limit for more)" if incident.task_count > len(incident.task_ids) else ""
        console.print(f"its {incident.task_count} task(s){more}:")
        for task_id in incident.task_ids:
            command_line(f"  {task_id}")
