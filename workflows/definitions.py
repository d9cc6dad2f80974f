"""Task types, declared as data: each step names its Agent, its compensation and its policy.

Adding a task type is a definition here plus a five-line workflow class (see
``workflows/preorder.py``). A step's ``policy.complete_by_s`` is the Agent
activity's start-to-close timeout; workers may override it per step name with
``SAS_STEPS__<STEP>__...`` settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from task_models import OrderInput, PreorderInput, StepPolicyValues


@dataclass(frozen=True)
class StepDefinition:
    name: str
    agent: str
    compensation: str | None = None
    # None: the worker's SAS_DEFAULT_STEP__* settings. SAS_STEPS__<NAME>__* overrides either.
    policy: StepPolicyValues | None = None


@dataclass(frozen=True)
class TaskDefinition:
    task_type: str
    input_model: type[BaseModel]
    steps: tuple[StepDefinition, ...]


RESERVE = StepDefinition("reserve", agent="inventory.reserve", compensation="inventory.release")
CHARGE = StepDefinition("charge", agent="payment.charge", compensation="payment.refund")
SHIP = StepDefinition("ship", agent="shipping.ship", compensation="shipping.cancel")

ORDER = TaskDefinition("order", OrderInput, (RESERVE, CHARGE, SHIP))
PREORDER = TaskDefinition("preorder", PreorderInput, (RESERVE, CHARGE))
