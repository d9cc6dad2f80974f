"""A task started with a start delay (``sas submit --in/--at``) before it runs.

Until its delay ends, Temporal has the workflow but no workflow task: the Scheduler cannot
answer its ``status`` query and the state store has no row yet. ``sas status`` and
``sas show`` ask Temporal when it will start instead of saying "no task".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sas.cli.output import console, print_json, shown


def report(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(data)
        return
    if data["state"] == "Cancelled":
        at = data["cancelled_at"] or "?"
        console.print(f"{shown(data['task_id'])}: cancelled before it started, at {at} ({shown(data['reason'])})")
        return
    when = datetime.fromisoformat(data["scheduled_for"]).strftime("%Y-%m-%d %H:%M:%S %Z")
    if data["due"]:
        console.print(f"{shown(data['task_id'])}: due since {when}, waiting for a worker to pick it up")
    else:
        console.print(f"{shown(data['task_id'])}: scheduled for {when}; nothing has run yet")
