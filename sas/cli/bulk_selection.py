"""Which tasks a bulk `sas retry | compensate | resubmit` acts on: the flags, checked into a
``Selection`` (`--state --step --since --task-type`, a Temporal visibility query `--query`, or
an incident's tasks `--incident ID`), always bounded by `--limit`, never "every task". The
task client selects the tasks (``sas.client.bulk``)."""

from __future__ import annotations

import re
from datetime import timedelta

import typer

from sas.cli.output import CliError
from sas.client.selection import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, Selected, Selection

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MAX_QUERY_CHARS", "Selected", "Selection", "check", "check_query"]

# Bounds of --since: a second at least, a retention period at most (older tasks are history).
MAX_SINCE = timedelta(days=90)

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
    tasks["parked"] = TaskState.ERROR  # what the docs and the UI call a task in Error (it waits for an operator)
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


def check_query(query: str) -> str:
    """The user's visibility filter, if it stays one group within this deployment's tasks
    (``sas.client.bulk.check_query`` says how); a CliError saying what is wrong if not."""
    from sas.client.bulk import check_query as checked
    from sas.client.errors import InvalidInput

    try:
        return checked(query)
    except InvalidInput as err:
        raise CliError(err.message, err.hint) from None
