"""Bulk operator actions: `sas retry | compensate | resubmit` over a selection instead of one id.

After an incident that parked 300 orders at the charge step, one command acts on all of them:

    sas retry --state error --step charge --since 2h --dry-run     # list them; nothing is done
    sas retry --state error --step charge --since 2h --yes         # act; per-task results

The task client selects the tasks and acts on each as the single-task command does
(``sas.client.bulk`` says how, and why not with a Temporal batch operation); this module takes
the flags, lists the selection (``--dry-run``), refuses to act without ``--yes``, shows the
progress and prints a result per task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import typer

from sas.cli import context
from sas.cli.bulk_selection import Selected, Selection, check
from sas.cli.output import CliError, Markup, ago, console, err_console, print_json, shown, styled, table
from sas.client.selection import DEFAULT_CONCURRENCY, MAX_CONCURRENCY, Action, Result

if TYPE_CHECKING:
    from sas.client.results import BulkResult

CONCURRENCY = typer.Option(
    DEFAULT_CONCURRENCY, "--concurrency", help=f"Tasks acted on at once (1 to {MAX_CONCURRENCY})."
)
DRY_RUN = typer.Option(False, "--dry-run", help="With a selection: list the tasks it selects; do nothing.")
YES = typer.Option(False, "--yes", help="With a selection: act on the selected tasks (required).")
JSON = typer.Option(False, "--json", help="With a selection: print JSON instead of tables.")


@dataclass(frozen=True)
class Flags:
    """The selection and bulk flags of one command, as typed."""

    states: list[str] | None
    step: str | None
    since: str | None
    task_type: str | None
    query: str | None
    limit: int
    concurrency: int
    dry_run: bool
    yes: bool
    as_json: bool
    incident: int | None = None

    def bulk_only(self) -> list[str]:
        from sas.cli.bulk_selection import DEFAULT_LIMIT

        given = {
            "--dry-run": self.dry_run,
            "--yes": self.yes,
            "--json": self.as_json,
            "--limit": self.limit != DEFAULT_LIMIT,
            "--concurrency": self.concurrency != DEFAULT_CONCURRENCY,
        }
        return [name for name, on in given.items() if on]


def refuse_selection_with_id(flags: Flags, *, step_is_single: bool = False) -> None:
    """A command given one task id acts on it alone, as before; selection or bulk flags with
    an id are refused rather than half-applied. ``step_is_single``: ``sas retry ID --step NAME``
    names the step to retry, as it always has."""
    extra = flags.bulk_only()
    if (
        flags.states
        or flags.since
        or flags.task_type
        or flags.query
        or flags.incident is not None
        or (flags.step and not step_is_single)
    ):
        extra.insert(0, "a selection")
    if extra:
        raise CliError(
            f"a task id and {', '.join(extra)}: give one task id, or a selection without an id",
            "e.g. `sas retry ORDER-ID`, or `sas retry --state error --step charge --dry-run`",
        )


def run(action: Action, flags: Flags, *, by: str | None, reason: str) -> int:
    """The bulk command: select, then list (dry run), refuse (no --yes), or act, each one call
    of the task client (``TaskClient.select``, ``TaskClient.bulk``). The exit code."""
    if flags.dry_run and flags.yes:
        raise CliError("give --dry-run or --yes, not both")
    if not 1 <= flags.concurrency <= MAX_CONCURRENCY:
        raise CliError(f"--concurrency {flags.concurrency}: must be 1 to {MAX_CONCURRENCY}")
    selection = check(
        flags.states, flags.step, flags.since, flags.task_type, flags.query, flags.limit, incident=flags.incident
    )
    from sas.cli import audit

    actor = audit.actor(by)
    audit.check_reason(reason)
    context.require_state_store(context.settings())
    if not flags.yes:
        chosen = context.call(lambda tasks: tasks.select(selection))
        if not chosen.tasks:
            return _nothing(action, selection, flags)
        _print_plan(action, selection, chosen, flags.as_json)
        if flags.dry_run:
            if not flags.as_json:
                console.print(f"dry run: nothing done; add --yes instead of --dry-run to {action} them")
            return 0
        err_console.print(
            f"[bold red]sas:[/bold red] nothing done: add --yes to {action} these {len(chosen.tasks)} task(s) "
            "(--dry-run only lists them)"
        )
        return 2
    progress = _Progress(action, flags.concurrency)
    with progress:
        done = context.call(
            lambda tasks: tasks.bulk(
                action,
                selection,
                by=actor,
                reason=reason,
                concurrency=flags.concurrency,
                on_start=progress.start,
                on_result=progress.advance,
            )
        )
    if not done.results:
        return _nothing(action, selection, flags)
    _print_results(action, done, flags.as_json)
    return 1 if any(r.outcome == "failed" for r in done.results) else 0


def _nothing(action: Action, selection: Selection, flags: Flags) -> int:
    # Nothing to act on is an answer, not a failure: a script that retries whatever is parked
    # must not fail when nothing is.
    if flags.as_json:
        print_json({"action": action, "dry_run": flags.dry_run, "selection": selection.describe(), "tasks": []})
    else:
        console.print(f"no task matches {shown(selection.describe())}: nothing to {action}")
    return 0


# ------------------------------------------------------------------ acting


class _Progress:
    """A rich progress bar on a terminal; a plain line every tenth of the way otherwise. Its
    total is known once the task client has selected the tasks (``start``)."""

    def __init__(self, action: Action, concurrency: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.action, self.concurrency = action, concurrency
        self.total, self.done, self.counts = 0, 0, {"ok": 0, "skipped": 0, "failed": 0}
        self.bar: Progress | None = None
        if err_console.is_terminal:
            self.bar = Progress(
                TextColumn(f"{action}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console
            )
            self.task = self.bar.add_task(action, total=None)
        self.step = 1

    def start(self, bulk_id: str, chosen: Selected) -> None:
        self.total = len(chosen.tasks)
        self.step = max(1, self.total // 10)
        if self.bar is not None:
            self.bar.update(self.task, total=self.total)
        if self.total:
            # Said first, so an interrupted run can still be found in the audit log by its id.
            err_console.print(
                f"{self.action} (bulk {bulk_id}): {self.total} task(s), {self.concurrency} at a time",
                markup=False,
                highlight=False,
            )

    def __enter__(self) -> _Progress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def advance(self, result: Result) -> None:
        self.done += 1
        self.counts[result.outcome] += 1
        if self.bar is not None:
            self.bar.advance(self.task)
        elif self.done % self.step == 0 or self.done == self.total:
            counts = ", ".join(f"{v} {k}" for k, v in self.counts.items())
            err_console.print(f"{self.action}: {self.done}/{self.total} ({counts})", markup=False, highlight=False)


# ---------------------------------------------------------------- printing


def _cut(chosen: Selected, selection: Selection) -> str:
    more = f"; more match: the {selection.limit} oldest (--limit), run again for the rest"
    return more if chosen.more else ""


def _print_plan(action: Action, selection: Selection, chosen: Selected, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "action": action,
                "dry_run": True,
                "selection": selection.describe(),
                "limit": selection.limit,
                "more": chosen.more,
                "tasks": [
                    {
                        "task_id": t.task_id,
                        "task_type": t.task_type,
                        "state": t.state,
                        "step": t.step,
                        "step_state": t.step_state,
                        "last_error": t.last_error,
                        "updated_at": t.updated_at,
                    }
                    for t in chosen.tasks
                ],
            }
        )
        return
    # One line per task at 80 columns: the last error cut (`sas status ID` shows it whole).
    console.print(
        table(
            f"{action}: {len(chosen.tasks)} task(s) selected by {selection.describe()}{_cut(chosen, selection)}",
            ["task", "state", "step", "changed", "last error"],
            [[t.task_id, styled(t.state), t.step, ago(t.updated_at), _short(t.last_error, 28)] for t in chosen.tasks],
        )
    )


def _short(text: str | None, width: int) -> str:
    if not text:
        return ""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _print_results(action: Action, done: BulkResult, as_json: bool) -> None:
    bulk_id, results = done.bulk_id, done.results
    counts = {k: sum(1 for r in results if r.outcome == k) for k in ("ok", "skipped", "failed")}
    if as_json:
        print_json(
            {
                "action": action,
                "bulk_id": bulk_id,
                "more": done.more,
                "counts": counts,
                "results": [asdict(r) for r in results],
            }
        )
        return
    style = {"ok": "green", "skipped": "yellow", "failed": "bold red"}
    console.print(
        table(
            f"{action} (bulk {bulk_id}): " + ", ".join(f"{v} {k}" for k, v in counts.items()),
            ["task", "outcome", "reason"],
            [[r.task_id, Markup(f"[{style[r.outcome]}]{r.outcome}[/]"), r.reason] for r in results],
        )
    )
    if done.more:
        console.print("more tasks match than --limit: run the command again for the rest")
