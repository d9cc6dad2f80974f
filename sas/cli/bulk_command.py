"""The one shape of ``sas retry``, ``compensate`` and ``resubmit``: a task id and the action on
that task alone, or no id and a selection acted on in bulk (``sas/cli/bulk.py``).

The three take the same options, so they are declared here once and each command gives only
what is its own: how it acts on one task, its own ``--step`` if the step names what to act on
(``sas retry ID --step NAME``), and any option of its own (``compensate --force``). Typer reads
a command's options from its signature, so the command is built with the signature made here.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import typer

from sas.cli import acting, bulk, bulk_selection

if TYPE_CHECKING:
    from sas.client.selection import Action
    from sas.client.task_client import TaskClient

# What one task's action runs: given the task client, the actor and the command's options.
OneTask = Callable[["TaskClient", str, Mapping[str, Any]], Awaitable[Any]]


def option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    """One option of a command, as its signature holds it (``default``: a ``typer.Option``)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def action_command(
    action: Action,
    one_task: OneTask,
    doc: str,
    *,
    step: Any = None,
    own: Sequence[inspect.Parameter] = (),
    check: Callable[[Mapping[str, Any]], None] | None = None,
) -> Callable[..., None]:
    """The command ``sas <action>``. ``step``: the command's own ``--step`` option, which names
    the step a task id acts on (listed right after the id); else ``--step`` only selects.
    ``own``: its options after the shared ones; ``check``: its checks of them, first of all."""
    step_option = option("step", str | None, step if step is not None else bulk_selection.STEP)
    who = [option("by", str | None, acting.BY), option("reason", str, acting.REASON)]
    state = option("state", list[str] | None, bulk_selection.STATE)
    head = [step_option, *who, state] if step is not None else [*who, state, step_option]
    params = [
        option("task_id", str | None, acting.TASK_ID),
        *head,
        option("since", str | None, bulk_selection.SINCE),
        option("task_type", str | None, bulk_selection.TASK_TYPE),
        option("query", str | None, bulk_selection.QUERY),
        option("limit", int, bulk_selection.LIMIT),
        option("concurrency", int, bulk.CONCURRENCY),
        option("dry_run", bool, bulk.DRY_RUN),
        option("yes", bool, bulk.YES),
        option("as_json", bool, bulk.JSON),
        option("incident", int | None, bulk_selection.INCIDENT),
        *own,
    ]

    def command(**given: Any) -> None:
        flags = bulk.Flags(
            given["state"],
            given["step"],
            given["since"],
            given["task_type"],
            given["query"],
            given["limit"],
            given["concurrency"],
            given["dry_run"],
            given["yes"],
            given["as_json"],
            given["incident"],
        )
        if check is not None:
            check(given)
        task_id, by, reason = given["task_id"], given["by"], given["reason"]
        if task_id is None:
            raise typer.Exit(bulk.run(action, flags, by=by, reason=reason))
        bulk.refuse_selection_with_id(flags, step_is_single=step is not None)
        done = acting.act(task_id, by, reason, lambda client, actor: one_task(client, actor, given))
        acting.follow_hint(task_id, done.message)

    command.__dict__["__signature__"] = inspect.Signature(params, return_annotation=None)
    command.__doc__ = doc
    command.__name__ = command.__qualname__ = action
    return command
