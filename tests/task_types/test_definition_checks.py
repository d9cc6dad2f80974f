"""A task definition is checked before it runs (``sas/task_types/checks.py``): each rule it
breaks is one line naming the module, the type, the step and the rule, from the worker's
discovery and from ``sas types``, which shows the type as broken with that line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sas.task_types.checks import RESERVED_HANDLERS
from sas.task_types.discovery import TaskTypeError
from sas.workflows import registry
from tests.task_types.conftest import Register, trip_module
from tests.task_types.test_cli import sas, write_module

NOTE_REASON = '    irreversible="a note stays on the booking, which its undo cancels",\n'
WAITS = "from datetime import timedelta\nfrom sas.api import StepPolicyValues, Wait\n"


def tour(stages: str = "(Parallel(FLIGHT, HOTEL), NOTE)", pivot: str | None = None, extra: str = "") -> str:
    """The test trip with other stages (and a pivot); ``extra`` declares what they name."""
    text = trip_module(extra=WAITS + extra)
    declared = 'TaskDefinition("tour", TourInput, (Parallel(FLIGHT, HOTEL), NOTE))'
    assert declared in text
    pivot_arg = f", pivot={pivot!r}" if pivot else ""
    return text.replace(declared, f'TaskDefinition("tour", TourInput, {stages}{pivot_arg})')


RULES: list[tuple[str, Callable[[], str], str]] = [
    ("no undo", lambda: trip_module().replace(NOTE_REASON, ""), "step 'note': has no undo; give it one"),
    (
        "undo and read only",
        lambda: trip_module().replace("result=Cancelled),\n)", "result=Cancelled),\n    read_only=True,\n)", 1),
        "step 'flight': declares an undo and read_only=True; a step has one of them",
    ),
    (
        "blank reason",
        lambda: trip_module().replace(NOTE_REASON, '    irreversible="  ",\n'),
        "step 'note': irreversible=...: say in 1-200 characters why",
    ),
    (
        "complete-by out of bounds",
        lambda: tour(
            extra="LONG = StepDefinition('long', forward=INN.post('/inn/long', result=Booked), read_only=True,"
            " policy=StepPolicyValues.model_construct(complete_by_s=90_000.0))\n",
            stages="(Parallel(FLIGHT, HOTEL), NOTE, LONG)",
        ),
        "step 'long': policy complete_by_s: Input should be less than or equal to 86400",
    ),
    (
        "parallel of one",
        lambda: tour(
            extra="ONE = object.__new__(Parallel)\nobject.__setattr__(ONE, 'steps', (FLIGHT,))\n",
            stages="(ONE, HOTEL, NOTE)",
        ),
        "a parallel group of 1 step(s): give it two or more",
    ),
    (
        "signal named like the workflow's own",
        lambda: tour(
            extra="OK = Wait('ok', signal='retry', deadline=timedelta(days=1))\n",
            stages="(OK, Parallel(FLIGHT, HOTEL), NOTE)",
        ),
        "step 'ok': the wait's signal 'retry' is one of the task workflow's own",
    ),
    ("pivot unknown", lambda: tour(pivot="nope"), "pivot 'nope' is not one of its steps (flight, hotel, note)"),
    ("pivot in a group", lambda: tour(pivot="flight"), "step 'flight': the pivot is in a parallel group"),
    (
        "pivot a wait",
        lambda: tour(
            extra="LATER = Wait('later', delay=timedelta(hours=1))\n",
            stages="(Parallel(FLIGHT, HOTEL), LATER, NOTE)",
            pivot="later",
        ),
        "step 'later': a wait cannot be the pivot",
    ),
    (
        "approval after the pivot",
        lambda: tour(
            extra="OK = Wait('ok', signal='approve', deadline=timedelta(days=1))\n",
            stages="(Parallel(FLIGHT, HOTEL), NOTE, OK)",
            pivot="note",
        ),
        "step 'ok': a wait for a signal after the pivot 'note' could be rejected",
    ),
    (
        "branch as a stage",
        lambda: tour(extra=BRANCHES, stages="(Sequence(FLIGHT, HOTEL), NOTE)"),
        "a Sequence is a stage: a branch belongs in a parallel group",
    ),
    (
        "branch in a branch",
        lambda: tour(extra=BRANCHES, stages="(Parallel(Sequence(Sequence(FLIGHT), NOTE), HOTEL),)"),
        "a Sequence inside a Sequence: list its steps in the outer one",
    ),
    (
        "result of another branch",
        lambda: tour(extra=BRANCHES, stages="(Parallel(FLIGHT, Sequence(HOTEL, NOTE)),)"),
        "step 'note', body['flight']: Result('flight', ...) must name a step that finishes before this one starts",
    ),
]
BRANCHES = "from sas.api import Sequence\n"


@pytest.mark.parametrize(("text", "problem"), [(t, p) for _, t, p in RULES], ids=[i for i, _, _ in RULES])
def test_each_rule_broken_is_one_line_naming_the_type_the_step_and_the_rule(
    register: Register, text: Callable[[], str], problem: str
) -> None:
    (module,) = register(text())
    with pytest.raises(TaskTypeError, match=re.escape(problem)) as refused:
        registry.task_types()
    line = str(refused.value)
    assert line.startswith(f"{module}: task type 'tour': ") and "\n" not in line


def test_steps_after_the_pivot_need_no_undo_and_the_pivot_is_kept(register: Register) -> None:
    no_reason = trip_module().replace(NOTE_REASON, "")
    register(no_reason.replace("(Parallel(FLIGHT, HOTEL), NOTE))", "(Parallel(FLIGHT, HOTEL), NOTE), pivot='note')"))
    definition = registry.task_types()["tour"].definition
    assert definition.pivot == "note" and definition.pivot_role("note") == "pivot"
    assert definition.pivot_role("flight") is None


def test_the_workflow_s_own_handler_names_are_its_signals_and_query() -> None:
    from sas.workflows.shell.operator import OperatorHandlers

    names = set()
    for value in vars(OperatorHandlers).values():
        for kind in ("__temporal_signal_definition", "__temporal_query_definition"):
            found = getattr(value, kind, None)
            if found is not None:
                names.add(found.name)
        update = getattr(value, "_defn", None)
        if update is not None:
            names.add(update.name.removeprefix("request_"))  # a wait's update is request_<signal>
    assert names == set(RESERVED_HANDLERS)


def test_sas_types_shows_a_broken_type_with_its_line_and_the_others(tmp_path: Path) -> None:
    module = write_module(tmp_path, trip_module().replace(NOTE_REASON, ""))
    listed = sas(tmp_path, "types", "--json", module=module)
    assert listed.returncode == 2, listed.stderr
    by_name = {t["task_type"]: t for t in json.loads(listed.stdout)}
    assert by_name["tour"] == {
        "task_type": "tour",
        "broken": f"{module}: task type 'tour': step 'note': has no undo; give it one, or declare read_only=True"
        " (it changes nothing), irreversible='why', or make it forward only (at or after the task type's pivot)",
    }
    assert "steps" in by_name["order"]  # the installed types are listed as before
    shown = sas(tmp_path, "types", "tour", module=module)
    assert shown.returncode == 2 and "tour · broken: " in shown.stdout and "step 'note': has no undo" in shown.stdout


def test_a_step_after_another_in_its_branch_may_use_its_result(register: Register) -> None:
    register(tour(extra=BRANCHES, stages="(Parallel(Sequence(FLIGHT, NOTE), HOTEL),)"))
    definition = registry.task_types()["tour"].definition
    assert definition.finished_before("note") == {"flight"}
