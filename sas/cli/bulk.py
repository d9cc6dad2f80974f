"""Bulk operator actions: `sas retry | compensate | resubmit` over a selection instead of one id.

After an incident that parked 300 orders at the charge step, one command acts on all of them:

    sas retry --state error --step charge --since 2h --dry-run     # list them; nothing is done
    sas retry --state error --step charge --since 2h --yes         # act; per-task results

Each selected task goes through what the single-task command does, and nothing more:
1. Temporal is asked how the task's workflow stands now (``supervisor.temporal_view.look``);
   a workflow that finished is skipped with the reason, never retried or compensated on the
   mirror's word (the mirror follows Temporal, never leads it).
2. The Scheduler's ``request_retry`` / ``request_compensate`` update, whose validator accepts
   or rejects with a reason; or, for ``resubmit`` of a finished Compensated or Error task,
   its next incarnation (``sas.client.submitting.resubmit_finished``).
3. The Scheduler (or the accepting run, for a new incarnation) writes the task's audit entry,
   as for one task. The reason carries ``(bulk <id>)`` so one run's entries can be found together.

Why a bounded concurrent loop, not a Temporal batch operation: a batch operation
(``StartBatchOperation``, reached through ``client.workflow_service``) applies a signal,
cancel, terminate, reset or activity operation server-side to every workflow a visibility
query matches (or to a list of executions). It would carry our ``retry`` and ``compensate``
*signals*, but it reports counts only, and the Scheduler ignores a signal that does not
apply (it records an event), so the operator would get no per-task "accepted" or "rejected
because ..."; it has no operation for the validated *updates* that give that answer; and
resubmitting a finished task starts a new run, which no batch operation does. So sas sends
the updates itself, after its own look at each workflow, at most ``--concurrency`` (default
8, at most 32) at a time, each given ``TASK_TIMEOUT_S``.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal

import typer

from sas.cli import context
from sas.cli.bulk_selection import Selected, Selection, check, select
from sas.cli.output import CliError, Markup, ago, console, err_console, print_json, shown, styled, table

if TYPE_CHECKING:
    from temporalio.client import Client

    from sas.client.store import StateStore
    from sas.state_store.selection import SelectedTask
    from sas.task_models import OperatorRequest

Action = Literal["retry", "compensate", "resubmit"]
Outcome = Literal["ok", "skipped", "failed"]

DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 32
# One task's action, all told: a describe, an update (which waits for a worker to take it in),
# or a new incarnation that a worker must accept (resubmit_finished waits for it).
TASK_TIMEOUT_S = 60.0

CONCURRENCY = typer.Option(
    DEFAULT_CONCURRENCY, "--concurrency", help=f"Tasks acted on at once (1 to {MAX_CONCURRENCY})."
)
DRY_RUN = typer.Option(False, "--dry-run", help="With a selection: list the tasks it selects; do nothing.")
YES = typer.Option(False, "--yes", help="With a selection: act on the selected tasks (required).")
JSON = typer.Option(False, "--json", help="With a selection: print JSON instead of tables.")

_DONE = {"retry": "retried", "compensate": "compensated", "resubmit": "resubmitted"}


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


@dataclass(frozen=True)
class Result:
    """What happened to one selected task."""

    task_id: str
    outcome: Outcome
    reason: str


def run(action: Action, flags: Flags, *, by: str | None, reason: str) -> int:
    """The bulk command: select, then list (dry run), refuse (no --yes), or act. The exit code."""
    if flags.dry_run and flags.yes:
        raise CliError("give --dry-run or --yes, not both")
    if not 1 <= flags.concurrency <= MAX_CONCURRENCY:
        raise CliError(f"--concurrency {flags.concurrency}: must be 1 to {MAX_CONCURRENCY}")
    selection = check(
        flags.states, flags.step, flags.since, flags.task_type, flags.query, flags.limit, incident=flags.incident
    )
    from sas.cli import audit

    actor = audit.actor(by)
    bulk_id = uuid.uuid4().hex[:8]
    request = _request(action, flags.step, actor, f"{reason} (bulk {bulk_id})".strip())

    async def go() -> tuple[Selected, list[Result] | None]:
        context.require_state_store(context.settings())
        # Temporal is asked only for a visibility query or to act: a dry run from the state store needs none.
        client = await context.client() if selection.query is not None or flags.yes else None
        chosen = await select(client, context.settings().temporal.task_queue, selection)
        if not chosen.tasks or flags.dry_run or not flags.yes:
            return chosen, None
        client = client or await context.client()
        return chosen, await _act_all(client, action, bulk_id, request, chosen.tasks, flags.concurrency)

    chosen, results = context.run(go)
    if not chosen.tasks:
        # Nothing to act on is an answer, not a failure: a script that retries whatever is
        # parked must not fail when nothing is.
        if flags.as_json:
            print_json({"action": action, "dry_run": flags.dry_run, "selection": selection.describe(), "tasks": []})
        else:
            console.print(f"no task matches {shown(selection.describe())}: nothing to {action}")
        return 0
    if results is None:
        _print_plan(action, selection, chosen, flags.as_json)
        if flags.dry_run:
            if not flags.as_json:
                console.print(f"dry run: nothing done; add --yes instead of --dry-run to {action} them")
            return 0
        n = len(chosen.tasks)
        err_console.print(
            f"[bold red]sas:[/bold red] nothing done: add --yes to {action} these {n} task(s) "
            "(--dry-run only lists them)"
        )
        return 2
    _print_results(action, bulk_id, chosen, results, flags.as_json)
    return 1 if any(r.outcome == "failed" for r in results) else 0


def _request(action: Action, step: str | None, by: str, reason: str) -> OperatorRequest:
    from sas.cli.tasks import operator_request

    return operator_request(
        step=step if action == "retry" else None, by=by, reason=reason, reset_failure_count=action == "resubmit"
    )


# ------------------------------------------------------------------ acting


async def _act_all(
    client: Client,
    action: Action,
    bulk_id: str,
    request: OperatorRequest,
    targets: list[SelectedTask],
    concurrency: int,
) -> list[Result]:
    """Act on every target, at most ``concurrency`` at a time, with a progress bar on a terminal."""
    import asyncio

    from sas.client.errors import ClientError

    gate = asyncio.Semaphore(concurrency)
    progress = _Progress(action, len(targets))
    # Said first, so an interrupted run can still be found in the audit log by its id.
    err_console.print(
        f"{action} (bulk {bulk_id}): {len(targets)} task(s), {concurrency} at a time", markup=False, highlight=False
    )

    async def one(target: SelectedTask) -> Result:
        async with gate:
            try:
                result = await asyncio.wait_for(_act(client, action, request, target), TASK_TIMEOUT_S)
            except TimeoutError:
                result = Result(
                    target.task_id,
                    "failed",
                    f"no answer within {TASK_TIMEOUT_S:.0f}s (is a worker polling?); it may still apply",
                )
            except (CliError, ClientError) as err:
                result = Result(target.task_id, "failed", err.message)
            except Exception as err:  # noqa: BLE001 - one task's failure must not stop the others
                result = Result(target.task_id, "failed", f"{type(err).__name__}: {err}")
        progress.advance(result)
        return result

    with progress:
        return list(await asyncio.gather(*(one(t) for t in targets)))


async def _act(client: Client, action: Action, request: OperatorRequest, target: SelectedTask) -> Result:
    """One task: ask Temporal first, then act as the single-task command would, on the workflow
    that answers for the task (its Scheduler, or its clean-up once the Scheduler is closed)."""
    from temporalio.api.enums.v1 import PendingActivityState

    from sas.cli.answering import answering_workflow
    from sas.supervisor.temporal_view import look

    paused = (
        PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
        PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED,
    )
    view = await look(client, target.task_id, target.chain_id, target.run_id)
    if view.status != "running":
        answering = await answering_workflow(client, target.task_id)
        if answering.cleanup:
            if action == "resubmit":
                return Result(
                    target.task_id,
                    "skipped",
                    f"its clean-up {answering.workflow_id} is still undoing it; finish it first "
                    f"(sas retry / sas compensate {target.task_id})",
                )
            return await _act_on_cleanup(client, action, request, target, answering.workflow_id)
    if view.status == "gone":
        return Result(target.task_id, "skipped", f"{view.how}: nothing to {action}")
    if view.status != "running":
        if action == "resubmit":
            return await _resubmit_finished(client, request, target, view.run_id, view.status == "completed")
        return Result(target.task_id, "skipped", f"finished in Temporal ({view.how}): not {_DONE[action]}")
    if action == "retry" and any(a.state in paused for a in view.activities):
        # Parked by `sas park` (its activity paused in Temporal): un-parked as `sas retry ID` does.
        from sas.client.parking import unpark

        unparked = await unpark(client, _store(), target.task_id, request.step, request.by, request.reason)
        if unparked is not None:
            return Result(target.task_id, "ok", unparked)
    update = "request_compensate" if action == "compensate" else "request_retry"
    return await _update(client, target.task_id, update, request, action)


async def _act_on_cleanup(
    client: Client, action: Action, request: OperatorRequest, target: SelectedTask, workflow_id: str
) -> Result:
    """A task whose Scheduler is closed and whose clean-up runs: the clean-up takes the request."""
    if action == "retry":
        from sas.client.parking import unpark

        unparked = await unpark(client, _store(), target.task_id, request.step, request.by, request.reason)
        if unparked is not None:
            return Result(target.task_id, "ok", unparked)
    update = "request_compensate" if action == "compensate" else "request_retry"
    result = await _update(client, target.task_id, update, request, action, workflow_id=workflow_id)
    if result.outcome == "ok":
        return Result(target.task_id, "ok", f"{result.reason} (by its clean-up {workflow_id})")
    return result


async def _update(
    client: Client, task_id: str, name: str, request: OperatorRequest, action: Action, workflow_id: str | None = None
) -> Result:
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError, RPCStatusCode

    from sas.task_models import OperatorAnswer

    try:
        answer = await client.get_workflow_handle(workflow_id or task_id).execute_update(
            name, request, result_type=OperatorAnswer
        )
    except WorkflowUpdateFailedError as err:
        return Result(task_id, "failed", "rejected: " + (getattr(err.cause, "message", None) or str(err.cause)))
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            # It finished between our look and the update: Temporal's word, so it is not acted on.
            return Result(task_id, "skipped", f"finished in Temporal meanwhile: not {_DONE[action]}")
        raise
    done = "FailureCount reset; " if action == "resubmit" else ""
    return Result(task_id, "ok", f"{done}{answer.message}")


async def _resubmit_finished(
    client: Client, request: OperatorRequest, target: SelectedTask, run_id: str | None, completed: bool
) -> Result:
    """A task whose workflow has closed runs again as its next incarnation, when Temporal and
    the mirror agree it ended Compensated or Error. A task Temporal shows Processed is done."""
    from sas.client.submitting import resubmit_finished
    from sas.state_store.incarnations import RESUBMITTABLE
    from sas.task_models import TaskResult, TaskState

    if target.chain_id is None:
        return Result(target.task_id, "skipped", "not in this state store: nothing to resubmit")
    if completed:
        handle = client.get_workflow_handle(target.task_id, run_id=run_id, result_type=TaskResult)
        ended = (await handle.result(follow_runs=False, rpc_timeout=timedelta(seconds=10))).state
        if ended == TaskState.PROCESSED:
            return Result(target.task_id, "skipped", "Processed in Temporal: done and stays done")
    if target.state not in RESUBMITTABLE:
        return Result(
            target.task_id,
            "skipped",
            f"{target.state} in the state store but closed in Temporal: run `sas reconcile --task {target.task_id}`",
        )
    incarnation = await resubmit_finished(client, _store(), target.task_id, request.by, request.reason)
    return Result(target.task_id, "ok", f"incarnation {incarnation} started, with new idempotency keys")


class _Progress:
    """A rich progress bar on a terminal; a plain line every tenth of the way otherwise."""

    def __init__(self, action: Action, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.total, self.done, self.counts = total, 0, {"ok": 0, "skipped": 0, "failed": 0}
        self.action = action
        self.bar: Progress | None = None
        if err_console.is_terminal:
            self.bar = Progress(
                TextColumn(f"{action}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err_console
            )
            self.task = self.bar.add_task(action, total=total)
        self.step = max(1, total // 10)

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


def _store() -> StateStore:
    from sas.client.store import StateStore

    return StateStore(context.settings())


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


def _print_results(action: Action, bulk_id: str, chosen: Selected, results: list[Result], as_json: bool) -> None:
    counts = {k: sum(1 for r in results if r.outcome == k) for k in ("ok", "skipped", "failed")}
    if as_json:
        print_json(
            {
                "action": action,
                "bulk_id": bulk_id,
                "more": chosen.more,
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
    if chosen.more:
        console.print("more tasks match than --limit: run the command again for the rest")
