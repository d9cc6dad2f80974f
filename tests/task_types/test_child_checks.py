"""A child step (``ChildTask``) is checked when the types load: it names a registered type by the
workflow it runs as, never runs its own type again, sits in a stage of its own, and a child with a
pivot runs only where nothing is undone. The pure rules of its id and of its end
(``workflows/core/children.py``) too."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from sas.task_models import TaskState
from sas.task_models.ids import MAX_TASK_ID, validate_task_id
from sas.task_types.checks import children_problem, definition_problem
from sas.task_types.discovery import TaskTypeError
from sas.task_types.groups import Parallel
from sas.task_types.steps import ChildTask, StepDefinition
from sas.task_types.task_definition import TaskDefinition
from sas.workflows import registry
from sas.workflows.core.children import CHILD_COMPENSATED, child_task_id, outcome_of
from sas_orders.steps import CHARGE, RESERVE, SHIP
from tests.task_types.conftest import Register, trip_module


class Given(BaseModel):
    sku: str = "x"


def _child(name: str, task_type: str, **more: object) -> ChildTask:
    return ChildTask(name, task_type=task_type, input=lambda ctx: dict(ctx.input), **more)  # type: ignore[arg-type]


def _type(task_type: str, *stages: object, pivot: str | None = None) -> TaskDefinition:
    return TaskDefinition(task_type, Given, stages, pivot=pivot)  # type: ignore[arg-type]


def _registered(*definitions: TaskDefinition) -> dict[str, tuple[TaskDefinition, str]]:
    return {d.task_type: (d, _child("x", d.task_type).workflow_type) for d in definitions}


def test_a_child_of_a_registered_type_keeps_the_rules() -> None:
    order = _type("order", RESERVE, CHARGE, SHIP)
    gift = _type("gift", RESERVE, _child("order", "order"), SHIP)
    assert definition_problem(gift) is None
    assert children_problem(gift, _registered(order, gift)) is None


def test_a_child_of_a_type_nobody_registered_is_refused() -> None:
    gift = _type("gift", _child("order", "parcel"))
    problem = children_problem(gift, _registered(gift))
    assert problem == "step 'order': child task type 'parcel' is not registered (the registered types: gift)"


def test_a_child_whose_workflow_is_named_otherwise_is_refused() -> None:
    order = _type("order", RESERVE)
    gift = _type("gift", _child("order", "order"))
    registered = {"order": (order, "ShopOrderWorkflow"), "gift": (gift, "GiftWorkflow")}
    problem = children_problem(gift, registered)
    assert problem is not None and "give ChildTask(..., workflow='ShopOrderWorkflow')" in problem
    named = _type("gift", _child("order", "order", workflow="ShopOrderWorkflow"))
    assert children_problem(named, registered) is None


def test_child_tasks_in_a_circle_are_refused() -> None:
    itself = _type("gift", RESERVE, _child("again", "gift"))
    assert "a task type never runs itself" in (children_problem(itself, _registered(itself)) or "")
    first = _type("first", _child("second", "second"))
    second = _type("second", _child("third", "third"))
    third = _type("third", _child("first", "first"))
    problem = children_problem(first, _registered(first, second, third))
    assert problem == (
        "step 'second': the child tasks run in a circle (first -> second -> third -> first); a task type never runs itself"
    )


def test_a_child_with_a_pivot_runs_only_where_nothing_is_undone() -> None:
    committed = _type("committed", RESERVE, CHARGE, pivot="charge")
    before = _type("parent", _child("child", "committed"), SHIP)
    problem = children_problem(before, _registered(committed, before))
    assert problem is not None and "has a pivot ('charge') and cannot be undone past it" in problem
    after = _type("parent", SHIP, _child("child", "committed"), pivot="ship")
    assert children_problem(after, _registered(committed, after)) is None


def test_a_child_in_a_parallel_group_is_refused() -> None:
    gift = TaskDefinition("gift", Given, (Parallel(RESERVE, _child("order", "order")),))  # type: ignore[arg-type]
    assert definition_problem(gift) == "step 'order': a child task runs as a stage of its own, not in a parallel group"


def test_a_child_step_to_an_unregistered_type_stops_the_worker_in_one_line(register: Register) -> None:
    module = trip_module(extra="from sas.api import ChildTask\n").replace(
        "(Parallel(FLIGHT, HOTEL), NOTE))",
        '(Parallel(FLIGHT, HOTEL), NOTE, ChildTask("parcel", task_type="parcel", input=lambda ctx: {})))',
    )
    (name,) = register(module)
    with pytest.raises(TaskTypeError, match=re.escape(f"{name}: task type 'tour': step 'parcel': child task type")):
        registry.task_types()


def test_a_child_id_is_derived_from_its_parent_and_step_and_fits_a_task_id() -> None:
    assert child_task_id("g-1", "order") == "g-1:order"
    assert child_task_id("g-1", "order", incarnation=2) == "g-1:order.2"
    long = "p" * MAX_TASK_ID
    derived = child_task_id(long, "a_step_name_of_thirty_two_chars_")
    assert len(derived) == MAX_TASK_ID and validate_task_id(derived) == derived
    assert derived != child_task_id(long[:-1] + "q", "a_step_name_of_thirty_two_chars_")  # the digest tells them apart


def test_a_childs_end_decides_its_step() -> None:
    assert outcome_of("g-1:order", TaskState.PROCESSED).kind == "done"
    undid = outcome_of("g-1:order", TaskState.COMPENSATED)
    assert undid.kind == "failed" and undid.permanent and undid.error_type == CHILD_COMPENSATED
    gone = outcome_of("g-1:order", None, "terminated")
    assert gone.kind == "failed" and gone.permanent and "terminated" in gone.message


def test_a_step_that_is_not_a_child_is_unchanged() -> None:
    assert isinstance(RESERVE, StepDefinition) and RESERVE.agent == "inventory.reserve"
    assert _child("order", "order").agent == "child.order" and _child("order", "order").compensation is None
