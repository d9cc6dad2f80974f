"""Task types, declared as data: each step names its Agent, its compensation and its policy.

Adding a task type is a definition here plus a five-line workflow class (see
``workflows/preorder.py``). A step's ``policy.complete_by_s`` is the Agent
activity's start-to-close timeout; workers may override it per step name with
``SAS_STEPS__<STEP>__...`` settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel

from task_models import OrderInput, PreorderInput, StepPolicyValues
from task_models.ids import MAX_STEP_NAME

_STEP_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_STEP_NAME - 1}}}")


@dataclass(frozen=True)
class StepDefinition:
    name: str
    agent: str
    compensation: str | None = None
    # None: the worker's SAS_DEFAULT_STEP__* settings. SAS_STEPS__<NAME>__* overrides either.
    policy: StepPolicyValues | None = None

    def __post_init__(self) -> None:
        # Checked when the worker imports the definitions, so a bad name never reaches a
        # workflow: the name is part of every idempotency key and a mirror key (task_models/ids.py).
        if not _STEP_NAME.fullmatch(self.name):
            raise ValueError(
                f"step name {self.name!r}: use 1-{MAX_STEP_NAME} characters from a-z 0-9 _, starting with a letter"
            )


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
