"""Task types, declared as data: each step names its Agent, its compensation and its policy.

This is the step library; each task type declares its ``TaskDefinition`` in its own module
(``workflows/preorder.py``) and is registered with one line in ``workflows/registry.py``. A step references its Agents by their declarations in
``sas/task_models/activity_defs.py`` (``PaymentDefs.charge``), which also declare the model of
each one's result (``ChargeResult``): that is the step's result, handed to later steps and to
the step's own undo. A step's ``policy.complete_by_s`` is the Agent activity's start-to-close
timeout; workers may override it per step name with ``SAS_STEPS__<STEP>__...`` settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from pydantic import BaseModel

from sas.task_models import StepPolicyValues
from sas.task_models.activity_defs import (
    AgentRef,
    InventoryDefs,
    PaymentDefs,
    ShippingDefs,
    activity_name,
    agent_result,
)
from sas.task_models.ids import MAX_STEP_NAME

_STEP_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_STEP_NAME - 1}}}")


@dataclass(frozen=True)
class StepDefinition:
    name: str
    forward: AgentRef
    undo: AgentRef | None = None
    # None: the worker's SAS_DEFAULT_STEP__* settings. SAS_STEPS__<NAME>__* overrides either.
    policy: StepPolicyValues | None = None

    # Cached: the Scheduler looks its Agents up by name at every step (TaskDefinition.agents), and
    # a name is found by reading the activity's definition off its declaration. The steps are
    # module constants, shared by every run (workflows/definitions.py is passed through).
    @cached_property
    def agent(self) -> str:
        """The forward Agent's activity name, as recorded in the plan and the state store."""
        return activity_name(self.forward)

    @cached_property
    def compensation(self) -> str | None:
        return None if self.undo is None else activity_name(self.undo)

    @property
    def result(self) -> type[BaseModel] | None:
        """The model of the step's result: its Agent's (sas/task_models/results.py)."""
        return agent_result(self.agent)

    def __post_init__(self) -> None:
        # Checked when the worker imports the definitions, so a bad name never reaches a
        # workflow: the name is part of every idempotency key and a mirror key (sas/task_models/ids.py).
        if not _STEP_NAME.fullmatch(self.name):
            raise ValueError(
                f"step name {self.name!r}: use 1-{MAX_STEP_NAME} characters from a-z 0-9 _, starting with a letter"
            )


@dataclass(frozen=True)
class TaskDefinition:
    task_type: str
    input_model: type[BaseModel]
    steps: tuple[StepDefinition, ...]

    def agents(self) -> dict[str, AgentRef]:
        """Every Agent of the task type by activity name: the Scheduler finds a step's typed
        reference here from the name its accepted plan recorded."""
        refs = [(s.agent, s.forward) for s in self.steps]
        refs += [(s.compensation, s.undo) for s in self.steps if s.compensation is not None and s.undo is not None]
        return dict(refs)


RESERVE = StepDefinition("reserve", forward=InventoryDefs.reserve, undo=InventoryDefs.release)
CHARGE = StepDefinition("charge", forward=PaymentDefs.charge, undo=PaymentDefs.refund)
SHIP = StepDefinition("ship", forward=ShippingDefs.ship, undo=ShippingDefs.cancel)
