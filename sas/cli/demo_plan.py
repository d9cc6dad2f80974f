"""What ``sas demo`` needs besides the stack: the installed demo's plan (``sas.demos`` entry
points, ``sas.task_types.demos``), the quick timings it runs with, and the check that the
services' ledger agrees with where each task ended."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sas.cli.output import CliError

if TYPE_CHECKING:
    from sas.task_types.demos import DemoPlan


def demo_plan(name: str | None, count: int) -> tuple[str, DemoPlan]:
    """The demo to run and its plan for ``count`` tasks; CliError when there is none to run, or
    its task type is not registered."""
    from sas.client.inputs import TASK_TYPES
    from sas.task_types.demos import DemoNotFound, DemoPlanError, load_demo

    try:
        name, plan = load_demo(name, count)
    except DemoNotFound as err:
        raise CliError(f"sas demo: {err.message}", err.hint) from None
    except DemoPlanError as err:
        raise CliError(str(err)) from None
    if plan.task_type not in TASK_TYPES:
        raise CliError(
            f"demo {name!r} runs task type {plan.task_type!r}, which is not registered",
            f"registered: {', '.join(TASK_TYPES) or 'none'} (`sas types` lists them)",
        )
    return name, plan


# Quick enough to watch: seconds where production would use minutes or hours.
DEMO_ENV = {
    "SAS_DEFAULT_STEP__COMPLETE_BY_S": "3",
    "SAS_DEFAULT_STEP__MAX_ATTEMPTS": "3",
    "SAS_DEFAULT_STEP__INITIAL_INTERVAL_S": "0.3",
    "SAS_DEFAULT_STEP__MAX_INTERVAL_S": "1",
    "SAS_COMPENSATION__COMPLETE_BY_S": "3",
    "SAS_COMPENSATION__MAX_ATTEMPTS": "3",
    "SAS_COMPENSATION__INITIAL_INTERVAL_S": "0.3",
    "SAS_COMPENSATION__MAX_INTERVAL_S": "1",
    "SAS_SUPERVISOR__INTERVAL_S": "1",
    "SAS_SUPERVISOR__OVERDUE_GRACE_S": "2",
    "SAS_SUPERVISOR__FAILURE_THRESHOLD": "3",
    "SAS_SUPERVISOR__MAX_INTERVAL_S": "2",
    # The ladder: one quick Supervisor retry, then one try after a cool-down (hours in production).
    "SAS_SUPERVISOR__RETRIES": "1",
    "SAS_SUPERVISOR__RETRY_DELAY_S": "0.5",
    "SAS_SUPERVISOR__COOLDOWN_S": "4",
    "SAS_SUPERVISOR__COOLDOWN_TRIES": "1",
    # Notice a terminated workflow within seconds.
    "SAS_SUPERVISOR__ORPHAN_AFTER_S": "3",
    "SAS_SUPERVISOR__ORPHAN_CHECK_S": "2",
    "SAS_SUPERVISOR__QUEUE_CHECK_S": "5",
}


def check_ledger(expected: str, entries: list[dict[str, Any]], undo_actions: Mapping[str, str]) -> list[str]:
    """What is wrong with one task's ledger given where it ended; empty if consistent.
    ``undo_actions`` maps each forward action to the one that undoes it (the plan's)."""
    from sas.task_models import TaskState

    problems = []
    keys = [e["idempotency_key"] for e in entries]
    if len(keys) != len(set(keys)):
        problems.append("duplicate effect for one idempotency key")
    done = {e["action"] for e in entries}
    if expected == TaskState.PROCESSED and undo_actions:
        missing = [a for a in undo_actions if a not in done]
        if missing:
            problems.append(f"completed but no {', '.join(missing)} in the ledger")
        if any(u in done for u in undo_actions.values()):
            problems.append("completed yet something was undone")
    elif expected == TaskState.COMPENSATED:
        for forward, undo in undo_actions.items():
            if forward in done and undo not in done:
                problems.append(f"compensated but {forward} was never undone (no {undo} in the ledger)")
    return problems
