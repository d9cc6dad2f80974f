"""How the CLI talks to people: rich tables, ``--json``, human times, and errors that say what to do.

Everything printed goes through one sanitiser (``sas.runtime.terminal``): text from outside
(a remote result, an operator's reason, an alert, a last error) is shown with its control and
direction characters as visible escapes (``shown``, ``table``), and both consoles drop any
that a printing path let through (``_Sanitised``), so no escape sequence reaches the terminal.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderHook
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from sas.runtime.terminal import for_terminal, strip_unsafe

if TYPE_CHECKING:
    from rich.console import ConsoleOptions, ConsoleRenderable, RenderableType, RenderResult


class _Clean:
    """A renderable's segments without control or direction characters (rich's own styling
    and cursor controls, which are not in the text, stay)."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        segments: Iterator[Segment] = iter(console.render(self.inner, options))
        for segment in segments:
            if segment.control or not segment.text:
                yield segment
            else:
                yield Segment(strip_unsafe(segment.text), segment.style, segment.control)


class _Sanitised(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Clean(r) for r in renderables]  # type: ignore[misc]


def _console(**kw: Any) -> Console:
    made = Console(**kw)
    made.push_render_hook(_Sanitised())
    return made


console = _console()
# Errors are one line each, whatever the terminal's width.
err_console = _console(stderr=True, soft_wrap=True)


class CliError(Exception):
    """A failure the user can fix: printed as 'sas: <message>' plus a hint, exit code 1 (or given)."""

    def __init__(self, message: str, hint: str | None = None, code: int = 1) -> None:
        super().__init__(message)
        self.message, self.hint, self.code = message, hint, code


def shown(value: object) -> str:
    """Outside text for a markup string: sanitised (``for_terminal``), then markup-escaped."""
    return escape(for_terminal(value))


def print_json(data: Any) -> None:
    # json.dumps writes every control character as \\u00XX: JSON output needs no other sanitising.
    if hasattr(data, "model_dump"):
        data = data.model_dump(mode="json")
    sys.stdout.write(json.dumps(data, indent=2, default=_default) + "\n")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return str(value)


class Markup(str):
    """Text that is meant as rich markup (sas's own styling, with any user data in it escaped).
    Every other string the CLI shows is printed as it is: an id or a reason like
    ``[link=http://x]evil[/link]`` must not turn into a link."""


def command_line(text: str) -> None:
    """Print a command the user is told to run on a line of its own, never wrapped, so it can
    be copied whole however narrow the terminal (the terminal may fold it; the line is one)."""
    console.print(Text(for_terminal(text)), soft_wrap=True, highlight=False)


# ------------------------------------------------------------------ tables

# A column is not made narrower than its longest word (up to these caps) while another can give:
# the first column holds the row's id, which someone copies.
_ID_CAP = 40
_ID_MIN = 24
_ID_TAIL = 13  # "-" and the 12 hex digits of a generated id
_WORD_CAP = 24
# Padding (one space each side) and the vertical line of each column, plus the table's last edge.
_PER_COLUMN = 3


def table(title: str | None, columns: list[str], rows: list[list[Any]], ids: tuple[int, ...] = (0,)) -> Table:
    """Cells are shown literally (sanitised), except Markup (see ``styled``). Sized for the
    console: on a narrow terminal the widest columns give way first, lines wrap between words,
    and a word longer than its column ends in an ellipsis, never split over lines. The columns
    ``ids`` (the first, by default) hold ids, which someone copies: they are kept whole longest."""
    t = Table(title=escape(for_terminal(title)) if title else None, title_justify="left", header_style="bold")
    cells = [[_cell(v) for v in row] for row in rows]
    for column in columns:
        t.add_column(escape(column), overflow="ellipsis", no_wrap=False)
    widths = fit_widths(
        [[column, *(row[i].plain for row in cells)] for i, column in enumerate(columns)],
        console.width - _PER_COLUMN * len(columns) - 1,
        ids,
    )
    if widths is not None:
        for i, (column_obj, width) in enumerate(zip(t.columns, widths, strict=True)):
            column_obj.width = width
            if i in ids:
                for row in cells:
                    row[i] = _middle_cut(row[i], width)
    for row in cells:
        t.add_row(*row)
    return t


def _middle_cut(cell: Text, width: int) -> Text:
    """An id longer than its column, cut in the middle (``w80-customer-…-parked-c716fa44b200``):
    its start and its end, where ids differ (a random suffix, a case name), stay readable."""
    from rich.cells import cell_len

    lines = cell.plain.splitlines()
    if all(cell_len(line) <= width for line in lines) or width < 5:
        return cell
    cut = []
    for line in lines:
        if cell_len(line) > width:
            # The end gets the larger part: where generated ids keep their random suffix.
            tail = max((width - 1) // 2 + (width - 1) % 2, min(_ID_TAIL, width - 7))
            line = line[: width - 1 - tail] + "…" + line[len(line) - tail :]
        cut.append(line)
    return Text("\n".join(cut), style=cell.style)


def fit_widths(columns: list[list[str]], available: int, ids: tuple[int, ...] = (0,)) -> list[int] | None:
    """Column widths whose sum is at most ``available``, or None when every column fits as it is.

    Each column keeps its longest word whole (up to ``_ID_CAP`` for the ``ids`` columns,
    ``_WORD_CAP`` for the others) while the widest column that still can gives a character at a
    time; only if that is not enough do words give way: ids first, then the widest column."""
    from rich.cells import cell_len

    def lines(texts: Iterable[str]) -> Iterator[str]:
        for text in texts:
            yield from text.splitlines() or [""]

    natural = [max(cell_len(line) for line in lines(texts)) for texts in columns]
    if sum(natural) <= available:
        return None
    floors = []
    for i, texts in enumerate(columns):
        longest = max((cell_len(word) for line in lines(texts) for word in line.split()), default=1)
        floors.append(min(longest, _ID_CAP if i in ids else _WORD_CAP))
    widths = list(natural)
    while sum(widths) > available:
        giving = [i for i, w in enumerate(widths) if w > floors[i]]
        if not giving:
            break
        widths[max(giving, key=lambda i: widths[i])] -= 1
    # Then ids give way first, down to _ID_MIN: cut in the middle (``_middle_cut``), their start and
    # end still tell them apart; then the other wide columns, down to 12; then the widest of all.
    others = [i for i in range(len(widths)) if i not in ids]
    for floor, columns_giving in ((_ID_MIN, list(ids)), (12, others), (4, list(range(len(widths))))):
        while sum(widths) > available:
            giving = [i for i in columns_giving if i < len(widths) and widths[i] > floor]
            if not giving:
                break
            widths[max(giving, key=lambda i: widths[i])] -= 1
    return widths


def _cell(value: Any) -> Text:
    if isinstance(value, Markup):
        return Text.from_markup(value)
    return Text(for_terminal(value))


def stands_at(state: str, steps: list[dict[str, Any]], current: str | None) -> str:
    """The ", at step X" of a task's summary line. For an undone or parked task, the step whose
    failure decided it (a Compensated order whose charge was declined stands at charge, not at
    the ship step it never reached)."""
    from sas.task_models import StepState, TaskState

    if state in (TaskState.COMPENSATED, TaskState.COMPENSATING, TaskState.ERROR, TaskState.FAILED):
        waiting = [
            s for s in steps if s.get("state") in (StepState.ERROR, StepState.FAILED, StepState.COMPENSATION_FAILED)
        ]
        failed = waiting or [s for s in steps if s.get("last_error") and s.get("state") != StepState.SKIPPED]
        if failed:
            return f", at step {failed[-1]['name']}"
    return f", at step {current}" if current else ""


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


@functools.cache
def _state_style() -> dict[str, str]:
    from sas.task_models import StepState

    return {
        StepState.PROCESSED: "green",
        StepState.COMPENSATED: "yellow",
        StepState.ERROR: "bold red",
        StepState.FAILED: "red",
        StepState.COMPENSATION_FAILED: "bold red",
        StepState.PROCESSING: "cyan",
        StepState.COMPENSATING: "magenta",
        StepState.WAITING: "blue",
        StepState.SKIPPED: "dim",
        "Stuck": "bold red",
    }


def styled(state: object) -> Markup:
    """A state in its colour, as markup (the state itself sanitised and escaped)."""
    text = "" if state is None else str(state)
    style = _state_style().get(text)
    return Markup(f"[{style}]{shown(text)}[/{style}]" if style else shown(text))
