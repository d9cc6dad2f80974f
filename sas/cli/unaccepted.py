"""A task whose workflow ended before sas accepted it: what ``sas status`` and ``sas show`` say.

A run started without ``sas submit`` (plain ``temporal workflow start``, a team's own client)
with input its task type refuses fails at once, non-retryably, before its first write: the
state store never hears of it. Its story is then Temporal's alone, and these commands tell it
as that: the run failed, and why, rather than "Pending" from a query or "no such task".
``sas.client.status.closed_before_accepted`` finds it; this module prints it.
"""

from __future__ import annotations

from typing import Any

from sas.cli.output import console, shown, styled


def report(data: dict[str, Any]) -> None:
    """One task that never reached the state store, in two lines."""
    what = f"{data['error_type']}: " if data.get("error_type") else ""
    console.print(
        f"[bold]{shown(data['task_id'])}[/bold] ({shown(data['workflow_type'])}): {styled(data['state'])} before sas "
        f"accepted it, so nothing was done: {shown(what + data['reason'])}"
    )
    console.print("fix what it says and start it again under a new id (`sas submit --type TYPE --input FILE`)")
