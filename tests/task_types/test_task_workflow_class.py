"""``task_workflow`` makes a task type's class once per process: the workflow sandbox re-imports
the task type's module for every new run, and each import asks for the class again."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

from sas.api import TaskDefinition, task_workflow
from sas_orders.steps import CHARGE, RESERVE, SHIP


class _Input(BaseModel):
    amount_cents: int


def test_an_equal_definition_gets_the_class_made_before() -> None:
    first = task_workflow(TaskDefinition("cached_tour", _Input, (RESERVE, CHARGE)), "CachedTourWorkflow")
    # What a re-import does: the same declarations, built again, equal but not the same objects.
    again = task_workflow(TaskDefinition("cached_tour", _Input, (RESERVE, CHARGE)), "CachedTourWorkflow")
    assert again is first
    assert workflow._Definition.must_from_class(again).name == "CachedTourWorkflow"


def test_a_changed_definition_gets_a_class_of_its_own() -> None:
    two_steps = task_workflow(TaskDefinition("changed_tour", _Input, (RESERVE, CHARGE)), "ChangedTourWorkflow")
    three_steps = task_workflow(TaskDefinition("changed_tour", _Input, (RESERVE, CHARGE, SHIP)), "ChangedTourWorkflow")
    assert three_steps is not two_steps
    assert [s.name for s in three_steps.definition.steps] == ["reserve", "charge", "ship"]
    assert [s.name for s in two_steps.definition.steps] == ["reserve", "charge"]

    class _OtherInput(BaseModel):  # a model defined in a re-imported module is a new class each time
        amount_cents: int

    other_model = task_workflow(
        TaskDefinition("changed_tour", _OtherInput, (RESERVE, CHARGE, SHIP)), "ChangedTourWorkflow"
    )
    assert other_model is not three_steps
    assert other_model.definition.input_model is _OtherInput


def test_the_same_name_in_another_module_is_another_class() -> None:
    definition = TaskDefinition("moved_tour", _Input, (RESERVE,))
    here = task_workflow(definition, "MovedTourWorkflow")
    there = task_workflow(definition, "MovedTourWorkflow", module="tests.elsewhere")
    assert here is not there
    assert (here.__module__, there.__module__) == (__name__, "tests.elsewhere")
