"""How the CLI talks to people: rich tables, ``--json``, human times, and errors that say what to do."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

console = Console()
# Errors are one line each, whatever the terminal's width.
err_console = Console(stderr=True, soft_wrap=True)


class CliError(Exception):
    """A failure the user can fix: printed as 'sas: <message>' plus a hint, exit code 1 (or given)."""

    def __init__(self, message: str, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.message, self.hint, self.code = message, hint, code


def print_json(data: Any) -> None:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    sys.stdout.write(json.dumps(data, indent=2, default=_default) + "\n")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


class Markup(str):
    """Text that is meant as rich markup (sas's own styling, with any user data in it escaped).
    Every other string the CLI shows is printed as it is: an id or a reason like
    ``[link=http://x]evil[/link]`` must not turn into a link."""


def table(title: str | None, columns: list[str], rows: list[list[Any]]) -> Table:
    """Cells are shown literally, except Markup (see ``styled``)."""
    t = Table(title=escape(title) if title else None, title_justify="left", header_style="bold")
    for i, column in enumerate(columns):
        # The first column holds the row's id: kept on one line, whole, so it can be copied;
        # the other columns give way on a narrow terminal.
        t.add_column(escape(column), overflow="fold", no_wrap=i == 0)
    for row in rows:
        t.add_row(*[_cell(v) for v in row])
    return t


def _cell(value: Any) -> Text:
    if isinstance(value, Markup):
        return Text.from_markup(value)
    return Text("" if value is None else str(value))


def ago(when: datetime | None, now: datetime | None = None) -> str:
    """'3m ago', 'in 12s': how a person reads a timestamp."""
    if when is None:
        return "-"
    now = now or datetime.now(UTC)
    seconds = (now - when).total_seconds()
    text = duration(abs(seconds))
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600:02d}h"


STATE_STYLE = {
    "Processed": "green",
    "Compensated": "yellow",
    "Error": "bold red",
    "Failed": "red",
    "CompensationFailed": "bold red",
    "Processing": "cyan",
    "Compensating": "magenta",
    "Stuck": "bold red",
}


def styled(state: str) -> Markup:
    """A state in its colour, as markup (the state itself escaped)."""
    style = STATE_STYLE.get(state)
    return Markup(f"[{style}]{escape(state)}[/{style}]" if style else escape(state))
