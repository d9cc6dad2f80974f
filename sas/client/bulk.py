"""Bulk operator actions: retry, compensate or resubmit every task a selection picks.

After an incident that parked 300 orders at the charge step, one call acts on all of them
(``sas retry --state error --step charge --since 2h --yes`` is this, with a table):

1. The selection is read: one bounded read of the state store, one bounded visibility list
   (a ``query``), or an incident's tasks; never "every task".
2. Each task is acted on by the very function its single-task action runs (``operator.retry``,
   ``operator.compensate``, ``operator.resubmit``), so one task and three hundred take one path:
   Temporal is asked which workflow answers for the task and how it stands, a workflow that
   finished is never retried or compensated on the mirror's word (the mirror follows Temporal,
   never leads it), a step parked by pausing its activity is unpaused, anything else is the
   Scheduler's (or its clean-up's) ``request_retry`` / ``request_compensate`` update, whose
   validator accepts or rejects with a reason, and a finished Compensated or Error task is
   resubmitted as its next incarnation. The workflow (or the accepting run) writes the task's
   audit entry, as for one task; the reason carries ``(bulk <id>)``.
3. What that function raises is the task's result: a task in no state to take the action
   (``operator.NotActedOn``, or unknown) is ``skipped``, a refusal or any other error ``failed``.

Why a bounded concurrent loop, not a Temporal batch operation: a batch operation
(``StartBatchOperation``) would carry our ``retry`` and ``compensate`` *signals*, but it reports
counts only, and the Scheduler ignores a signal that does not apply, so the operator would get
no per-task "accepted" or "rejected because ..."; it has no operation for the validated
*updates* that give that answer; and resubmitting a finished task starts a new run, which no
batch operation does. So sas sends the updates itself, after its own look at each workflow, at
most ``concurrency`` (default 8, at most 32) at a time, each given ``TASK_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sas.client import operator
from sas.client.errors import ClientError, InvalidInput, TaskNotFound

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_LIMIT",
    "MAX_CONCURRENCY",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "TASK_TIMEOUT_S",
    "Action",
    "Result",
    "Selected",
    "Selection",
    "act_all",
    "act_one",
    "check_query",
    "select",
]
from sas.client.inputs import TASK_TYPES
from sas.client.selection import (
    DEFAULT_CONCURRENCY,
    DEFAULT_LIMIT,
    MAX_CONCURRENCY,
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    TASK_TIMEOUT_S,
    Action,
    Result,
    Selected,
    Selection,
)
from sas.client.store import StateStore

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.state_store.selection import SelectedTask
    from sas.task_models import OperatorRequest

_DONE = {"retry": "retried", "compensate": "compensated", "resubmit": "resubmitted"}


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
        raise InvalidInput(f"--query: give one line of at most {MAX_QUERY_CHARS} characters")
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
            raise InvalidInput(
                f"--query: a comment at character {i + 1} ({query[i : i + 2].strip()!r}); comments are not allowed",
                "write the filter without /* */, -- or # outside quoted values",
            )
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise InvalidInput(
                    f"--query: the ')' at character {i + 1} closes a parenthesis the query did not open",
                    "a --query is one filter within this deployment's tasks; balance its parentheses",
                )
        i += 1
    if quote:
        raise InvalidInput(f"--query: a value opened with {quote} is not closed")
    if depth:
        raise InvalidInput("--query: a '(' is not closed", "balance the query's parentheses")
    return query


# ---------------------------------------------------------------- selecting


async def select(client: Client | None, store: StateStore, task_queue: str, selection: Selection) -> Selected:
    """Run the selection: one bounded read of the state store, or one bounded visibility list
    whose ids are then looked up in the state store (for the state, step and last error).
    ``client`` is needed for a visibility query only."""
    from sas.state_store.selection import select_tasks, tasks_by_id

    if selection.incident is not None:
        return await _incident_tasks(store, selection.incident, selection.limit)
    if selection.query is None:
        wanted = selection.task_filter(datetime.now(UTC))
        found = await store.read(lambda s: select_tasks(s, wanted, selection.limit + 1))
        return Selected(tasks=found[: selection.limit], more=len(found) > selection.limit)
    assert client is not None, "a visibility query needs a Temporal client"
    listed = await _visibility(client, task_queue, selection.query, selection.limit + 1)
    ids = list(listed)[: selection.limit]
    rows = await store.read(lambda s: tasks_by_id(s, ids))
    return Selected(tasks=[rows.get(i) or listed[i] for i in ids], more=len(listed) > selection.limit)


async def _incident_tasks(store: StateStore, incident_id: int, limit: int) -> Selected:
    """An incident's member tasks now (``sas.state_store.incidents``), the earliest to join first. A
    resolved incident has none left: it selects nothing."""
    from sas.state_store.incidents import get_incident, incident_task_ids
    from sas.state_store.selection import tasks_by_id

    async def load(session: Any) -> tuple[bool, list[str], dict[str, SelectedTask]]:
        if await get_incident(session, incident_id) is None:
            return False, [], {}
        ids = await incident_task_ids(session, incident_id, limit + 1)
        return True, ids, await tasks_by_id(session, ids[:limit])

    known, ids, rows = await store.read(load)
    if not known:
        raise TaskNotFound(
            f"--incident {incident_id}: no such incident", "see the ids with `sas incidents --status all`"
        )
    return Selected(tasks=[rows[i] for i in ids[:limit] if i in rows], more=len(ids) > limit)


async def _visibility(client: Client, task_queue: str, query: str, limit: int) -> dict[str, SelectedTask]:
    """Workflow ids the query matches among sas's task workflows on this deployment's queue
    (not the Supervisor, clean-ups or another deployment's tasks), newest run of each id."""
    from temporalio.service import RPCError, RPCStatusCode

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
            raise InvalidInput(
                f"--query: Temporal refused it: {err.message}", "see `temporal workflow list --help`"
            ) from None
        raise
    return found


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ------------------------------------------------------------------ acting


async def act_all(
    client: Client,
    store: StateStore,
    action: Action,
    request: OperatorRequest,
    targets: list[SelectedTask],
    concurrency: int,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Act on every target, at most ``concurrency`` at a time; ``on_result`` hears of each as it is done.

    Retrying an incident's tasks lets its service's backlog go at once: before the first is
    retried, the service's staged release begins (``sas/breaker/backlog.py``), so that a service
    just back gets canaries, then growing waves, as after its breaker closes."""
    if action == "retry":
        await _release_incidents(store, [t.task_id for t in targets])
    gate = asyncio.Semaphore(concurrency)

    async def one(target: SelectedTask) -> Result:
        async with gate:
            try:
                result = await asyncio.wait_for(act_one(client, store, action, request, target.task_id), TASK_TIMEOUT_S)
            except TimeoutError:
                result = Result(
                    target.task_id,
                    "failed",
                    f"no answer within {TASK_TIMEOUT_S:.0f}s (is a worker polling?); it may still apply",
                )
            except Exception as err:  # noqa: BLE001 - one task's failure must not stop the others
                result = Result(target.task_id, "failed", f"{type(err).__name__}: {err}")
        if on_result is not None:
            on_result(result)
        return result

    return list(await asyncio.gather(*(one(t) for t in targets)))


async def _release_incidents(store: StateStore, task_ids: list[str]) -> list[str]:
    """Begin the staged release of each service whose open incident holds some of ``task_ids``
    (``--incident ID`` selects exactly one's; other flags may pick an incident's tasks too)."""
    from sas.breaker.backlog import release_backlog

    backlog = await store.read(lambda session: _incident_services(session, task_ids))
    if not backlog:
        return []
    breakers = {service: store.settings.services.service(service).breaker for service in backlog}
    return await store.sessions(lambda sessions: release_backlog(sessions, backlog, breakers, "an incident retried"))


async def _incident_services(session: Any, task_ids: list[str]) -> dict[str, int]:
    """Of ``task_ids``, how many each service's open incidents hold."""
    from sqlalchemy import func, select

    from sas.state_store.alerts import ACTIVE
    from sas.state_store.incident_tables import Incident, IncidentTask
    from sas.state_store.tables import Alert

    counts: dict[str, int] = {}
    # A bulk action has at most MAX_LIMIT targets: read in slices a database's IN list takes.
    for first in range(0, len(task_ids), 500):
        rows = await session.execute(
            select(Incident.service, func.count(func.distinct(IncidentTask.task_id)))
            .join(IncidentTask, IncidentTask.alert_id == Incident.alert_id)
            .join(Alert, Alert.id == Incident.alert_id)
            .where(IncidentTask.task_id.in_(task_ids[first : first + 500]), Alert.status.in_(ACTIVE))
            .where(Incident.service.is_not(None))
            .group_by(Incident.service)
        )
        for service, count in rows.all():
            counts[service] = counts.get(service, 0) + count
    return counts


async def act_one(client: Client, store: StateStore, action: Action, request: OperatorRequest, task_id: str) -> Result:
    """One task, by the function its single-task action runs (``sas retry ID``, ``sas compensate
    ID``, ``sas resubmit ID``), with the request's step, actor and reason: what that raises is
    this task's result. A task Temporal shows in no state to take it (finished, gone, Processed,
    its clean-up still undoing it) is ``skipped``; a refusal or any other error is ``failed``."""
    try:
        if action == "retry":
            done = await operator.retry(client, store, task_id, request.step, request.by, request.reason)
        elif action == "compensate":
            done = await operator.compensate(client, task_id, request.by, request.reason)
        else:
            done = (await operator.resubmit(client, store, task_id, request.by, request.reason))[0]
    except operator.NotActedOn as err:
        return Result(task_id, "skipped", f"{err.short}: not {_DONE[action]}")
    except TaskNotFound as err:
        return Result(task_id, "skipped", f"{_unprefixed(task_id, err.message)}: nothing to {action}")
    except ClientError as err:
        return Result(task_id, "failed", _unprefixed(task_id, err.message))
    return Result(task_id, "ok", done)


def _unprefixed(task_id: str, message: str) -> str:
    """A single-task message without its leading task id: each result is shown beside it already."""
    return message.removeprefix(f"{task_id}: ")
