"""Task types for the story tests, in a module of their own: the workflow sandbox imports a task
type's module for every run, and a test module (with pytest in it) is no place for that.

``gift`` names an amount in cents and no currency, and declares nothing: sas must not invent one.
``labelled`` declares its summary as a template of its input's fields."""

from __future__ import annotations

from pydantic import Field

from sas.api import TaskDefinition, TaskInput, task_workflow
from sas_orders.steps import CHARGE, RESERVE


class GiftInput(TaskInput):
    sku: str = Field(min_length=1, max_length=64)
    quantity: int = Field(gt=0)
    amount_cents: int = Field(gt=0)


GIFT = TaskDefinition("gift", GiftInput, (RESERVE, CHARGE))
LABELLED = TaskDefinition("labelled", GiftInput, (RESERVE, CHARGE), summary="{quantity} of {sku} as a gift")

GiftWorkflow = task_workflow(GIFT)
LabelledWorkflow = task_workflow(LABELLED)
