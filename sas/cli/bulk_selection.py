"""Which tasks a bulk `sas retry | compensate | resubmit` acts on: the flags, checked, and the
tasks they select, from the state store (`--state --step --since --task-type`), from a
Temporal visibility query (`--query`), or an incident's tasks (`--incident ID`). Always bounded
by `--limit`; never "every task"."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import typer

from sas.cli.output import CliError

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.state_store.selection import SelectedTask, TaskFilter

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# Bounds of --since: a second at least, a retention period at most (older tasks are history).
MAX_SINCE = timedelta(days=90)
MAX_QUERY_CHARS = 2000
# "parked" is what the docs and the UI call a task in Error (it waits for an operator).
STATE_ALIASES = {"parked": "Error"}

STATE = typer.Option(
    None,
    "--state",
    help="Select tasks in this state (repeatable): error (= parked), failed, compensating, "
    "compensated, processing, pending, or compensationfailed (its undo waits for a decision).",
)
STEP = typer.Option(None, "--step", help="Select tasks at this step: reserve | charge | ship.")
SINCE = typer.Option(None, "--since", help="Select tasks whose state changed within this long: 30m, 1h, 2d (<= 90d).")
TASK_TYPE = typer.Option(None, "--task-type", help="Select tasks of this type (`sas types` lists them).")
QUERY = typer.Option(
    None, "--query", help="Select by a Temporal visibility query instead, e.g. \"SasCurrentStep = 'charge'\"."
)
INCIDENT = typer.Option(
    None, "--incident", help="Select exactly the tasks of this incident (`sas incidents`); --limit up to 1000."
)
# Ranges are checked in ``check``, so a bad value gets sas's one-line error.
LIMIT = typer.Option(DEFAULT_LIMIT, "--limit", help=f"Act on at most this many tasks (1 to {MAX_LIMIT}).")


@dataclass(frozen=True)
class Selection:
    """Checked selection flags: a state-store filter, or a visibility query, and the bound."""

    limit: int
    query: str | None = None
    task_states: tuple[str, ...] = ()
    step_states: tuple[str, ...] = ()
    step: str | None = None
    since: timedelta | None = None
    task_type: str | None = None
    incident: int | None = None
    described: list[str] = field(default_factory=list)

    def task_filter(self, now: datetime) -> TaskFilter:
        from sas.state_store.selection import TaskFilter

        return TaskFilter(
            task_states=self.task_states,
            step_states=self.step_states,
            step=self.step,
            since=now - self.since if self.since is not None else None,
            task_type=self.task_type,
        )

    def describe(self) -> str:
        """The selection as flags, for headers and hints."""
        return " ".join(self.described)


def any_given(
    states: list[str] | None,
    step: str | None,
    since: str | None,
    task_type: str | None,
    query: str | None,
    incident: int | None = None,
) -> bool:
    return bool(states) or any(v is not None for v in (step, since, task_type, query, incident))


def check(
    states: list[str] | None,
    step: str | None,
    since: str | None,
    task_type: str | None,
    query: str | None,
    limit: int,
    *,
    allow_processed: bool = False,
    incident: int | None = None,
) -> Selection:
    """The flags as a Selection, or a CliError naming the bad one. Nothing given is refused:
    a bulk action over every task is never what an operator means."""
    if not any_given(states, step, since, task_type, query, incident):
        raise CliError(
            "no task id and no selection: refusing to act on every task",
            "give a task id, or select with --state, --step, --since, --task-type or --query (see --help)",
        )
    if not 1 <= limit <= MAX_LIMIT:
        raise CliError(f"--limit {limit}: must be 1 to {MAX_LIMIT}")
    if incident is not None:
        if states or step or since or task_type or query:
            raise CliError("give --incident or the other selection flags, not both", "an incident names its tasks")
        # The incident bounds the selection itself: the default --limit covers it up to MAX_LIMIT.
        limit = MAX_LIMIT if limit == DEFAULT_LIMIT else limit
        return Selection(limit=limit, incident=incident, described=[f"--incident {incident}"])
    if query is not None:
        if states or step or since or task_type:
            raise CliError("give --query or --state/--step/--since/--task-type, not both")
        query = check_query(query)
        return Selection(limit=limit, query=query, described=[f"--query {query!r}"])
    task_states, step_states = _states(states or [], allow_processed)
    described = [f"--state {s}" for s in (*task_states, *step_states)]
    if step is not None:
        step = _step(step)
        described.append(f"--step {step}")
    window = None
    if since is not None:
        window = parse_since(since)
        described.append(f"--since {since.strip()}")
    if task_type is not None:
        from sas.cli.tasks import TASK_TYPES

        if task_type not in TASK_TYPES:
            raise CliError(f"--task-type {task_type!r}: use one of: {', '.join(TASK_TYPES)}")
        described.append(f"--task-type {task_type}")
    return Selection(
        limit=limit,
        task_states=task_states,
        step_states=step_states,
        step=step,
        since=window,
        task_type=task_type,
        described=described,
    )


def _states(given: list[str], allow_processed: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    from sas.task_models import StepState, TaskState

    tasks = {s.value.lower(): s.value for s in TaskState}
    tasks.update(STATE_ALIASES)
    # Step-only states: a task whose current step is in one of them.
    steps = {s.value.lower(): s.value for s in StepState if s.value.lower() not in tasks}
    steps.pop("skipped", None)
    task_states: list[str] = []
    step_states: list[str] = []
    for name in given:
        key = name.strip().lower()
        if key in tasks:
            task_states.append(tasks[key])
        elif key in steps:
            step_states.append(steps[key])
        else:
            raise CliError(f"--state {name!r}: unknown state", f"use one of: {', '.join([*tasks, *steps])}")
    if str(TaskState.PROCESSED) in task_states and not allow_processed:
        raise CliError("--state processed: a Processed task is done and stays done", "select other states")
    return tuple(dict.fromkeys(task_states)), tuple(dict.fromkeys(step_states))


def _step(name: str) -> str:
    from sas.cli.tasks import TASK_TYPES

    known = list(dict.fromkeys(s.name for definition, _ in TASK_TYPES.values() for s in definition.steps))
    if name not in known:
        raise CliError(f"--step {name!r}: unknown step", f"use one of: {', '.join(known)}")
    return name


_DURATION = re.compile(r"\s*(\d{1,6})\s*([smhd])\s*")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str) -> timedelta:
    """``30m``, ``1h``, ``2d``: a whole number and a unit, from 1 second to 90 days."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise CliError(f"--since {text!r}: use a whole number and a unit, e.g. 30m, 1h, 2d")
    window = timedelta(seconds=int(match[1]) * _UNIT_S[match[2]])
    if not timedelta(seconds=1) <= window <= MAX_SINCE:
        raise CliError(f"--since {text!r}: must be from 1s to {MAX_SINCE.days}d")
    return window


# Comment openers of Temporal's SQL-like query parser; a `*/` alone would close one opened outside.
_COMMENT_MARKS = ("/*", "*/", "--", "#")


def check_query(query: str) -> str:
    """The user's visibility filter, if it stays one group: ``_visibility`` puts it in parentheses
    and adds this deployment's task queue and task workflow types, so a filter that closes a
    parenthesis it did not open (``x') OR (WorkflowId = 'y'``) would escape that scope.

    Quoted values (single, double or back quotes, with backslash escapes, as Temporal's query
    parser reads them) may hold any parenthesis; outside them every ``(`` must be closed, and no
    ``)`` may close what the filter did not open. Comments are refused outside quotes: Temporal's
    parser skips ``/* ... */``, ``-- ...`` and ``# ...``, so a quote or parenthesis inside one
    would be counted here but not there (``/* ' */ )`` escapes the group). The list is checked
    again on the client."""
    query = query.strip()
    if not query or len(query) > MAX_QUERY_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in query):
        raise CliError(f"--query: give one line of at most {MAX_QUERY_CHARS} characters")
    depth, quote, i = 0, "", 0
    while i < len(query):
        char = query[i]
        if quote:
            if char == "\\":
                i += 1  # the escaped character is part of the value
            elif char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif query.startswith(_COMMENT_MARKS, i):
            raise CliError(
                f"--query: a comment at character {i + 1} ({query[i : i + 2].strip()!r}); comments are not allowed",
                "write the filter without /* */, -- or # outside quoted values",
            )
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise CliError(
                    f"--query: the ')' at character {i + 1} closes a parenthesis the query did not open",
                    "a --query is one filter within this deployment's tasks; balance its parentheses",
                )
        i += 1
    if quote:
        raise CliError(f"--query: a value opened with {quote} is not closed")
    if depth:
        raise CliError("--query: a '(' is not closed", "balance the query's parentheses")
    return query


# ---------------------------------------------------------------- selecting


@dataclass
class Selected:
    """The tasks a selection picked, oldest change first, and whether ``--limit`` cut it short."""

    tasks: list[SelectedTask]
    more: bool


async def select(client: Client | None, task_queue: str, selection: Selection) -> Selected:
    """Run the selection: one bounded read of the state store, or one bounded visibility list
    whose ids are then looked up in the state store (for the state, step and last error).
    ``client`` is needed for a visibility query only."""
    from sas.cli import context
    from sas.state_store.selection import select_tasks, tasks_by_id

    if selection.incident is not None:
        return await _incident_tasks(selection.incident, selection.limit)
    if selection.query is None:
        wanted = selection.task_filter(datetime.now(UTC))
        found = await context.with_read_session(lambda s: select_tasks(s, wanted, selection.limit + 1))
        return Selected(tasks=found[: selection.limit], more=len(found) > selection.limit)
    assert client is not None, "a visibility query needs a Temporal client"
    listed = await _visibility(client, task_queue, selection.query, selection.limit + 1)
    ids = list(listed)[: selection.limit]
    rows = await context.with_read_session(lambda s: tasks_by_id(s, ids))
    return Selected(tasks=[rows.get(i) or listed[i] for i in ids], more=len(listed) > selection.limit)


async def _incident_tasks(incident_id: int, limit: int) -> Selected:
    """An incident's member tasks now (``state_store.incidents``), the earliest to join first. A
    resolved incident has none left: it selects nothing."""
    from sas.cli import context
    from sas.state_store.incidents import get_incident, incident_task_ids
    from sas.state_store.selection import tasks_by_id

    async def load(session: Any) -> tuple[bool, list[str], dict[str, SelectedTask]]:
        if await get_incident(session, incident_id) is None:
            return False, [], {}
        ids = await incident_task_ids(session, incident_id, limit + 1)
        return True, ids, await tasks_by_id(session, ids[:limit])

    known, ids, rows = await context.with_read_session(load)
    if not known:
        raise CliError(f"--incident {incident_id}: no such incident", "see the ids with `sas incidents --status all`")
    return Selected(tasks=[rows[i] for i in ids[:limit] if i in rows], more=len(ids) > limit)


async def _visibility(client: Client, task_queue: str, query: str, limit: int) -> dict[str, SelectedTask]:
    """Workflow ids the query matches among sas's task workflows on this deployment's queue
    (not the Supervisor, clean-ups or another deployment's tasks), newest run of each id."""
    from temporalio.service import RPCError, RPCStatusCode

    from sas.cli.tasks import TASK_TYPES
    from sas.state_store.selection import SelectedTask
    from sas.task_models.search_attributes import CURRENT_STEP, TASK_STATE

    workflow_types = {workflow_type for _, workflow_type in TASK_TYPES.values()}
    types = ", ".join(_quoted(workflow_type) for workflow_type in sorted(workflow_types))
    scoped = f"({check_query(query)}) AND TaskQueue = {_quoted(task_queue)} AND WorkflowType IN ({types})"
    found: dict[str, SelectedTask] = {}
    try:
        # Every run of an id is listed (a resubmitted task has several): ask for more rows than ids.
        async for run in client.list_workflows(scoped, limit=limit * 4, page_size=min(1000, limit * 4)):
            # The scope again, on what came back: only this deployment's task workflows, whatever
            # the server made of the text.
            if run.id in found or run.task_queue != task_queue or run.workflow_type not in workflow_types:
                continue
            attributes = run.typed_search_attributes
            found[run.id] = SelectedTask(
                task_id=run.id,
                task_type=run.workflow_type,
                state=attributes.get(TASK_STATE) or (run.status.name.lower() if run.status else "unknown"),
                step=attributes.get(CURRENT_STEP),
                step_state=None,
                last_error=None,
                chain_id=None,
                run_id=None,
                updated_at=run.start_time,
            )
            if len(found) >= limit:
                break
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise CliError(
                f"--query: Temporal refused it: {err.message}", "see `temporal workflow list --help`"
            ) from None
        raise
    return found


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
