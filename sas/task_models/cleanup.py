"""What ``CleanupWorkflow`` is given: a dead task as the mirror recorded it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sas.task_models.fanout import FanOutItem
from sas.task_models.ids import MAX_TASK_ID
from sas.task_models.plans import StepPolicyValues
from sas.task_models.versions import CLEANUP_STAMP_BASE

# Stamps the clean-up workflow writes with, above anything a Scheduler could have written
# (see task_models.versions): a dead workflow's late writes never win over its clean-up.
CLEANUP_SEQ = CLEANUP_STAMP_BASE


class FanOutItems(BaseModel):
    """A fan-out step's attempted items, as its dead Scheduler's history started their batches:
    the clean-up undoes each under its own key. ``error`` says why they could not be listed."""

    items: list[FanOutItem] = Field(default_factory=list, description="In the order they were attempted.")
    batch_size: int = Field(default=1, ge=1)
    max_concurrency: int = Field(default=1, ge=1, description="Items at once in one undo batch.")
    error: str | None = None


class CleanupStep(BaseModel):
    """One step as the mirror recorded it when its workflow died."""

    name: str
    position: int
    state: str
    compensation: str | None
    idempotency_key: str
    task_queue: str | None = Field(default=None, description="Its service's queue; None: the clean-up's own.")
    version: int = Field(default=0, description="The row's version: Processed steps are undone latest first.")
    agent: str | None = Field(default=None, description="Its forward Agent: child.<type> for a child step.")
    fan_out: FanOutItems | None = Field(default=None, description="A fan-out step: its items to undo.")


class CleanupRequest(BaseModel):
    """Which task a clean-up is for: all it takes from its own input. What it undoes is derived
    from the state store and Temporal (``cleanup.plan``), never from what it was given."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(max_length=MAX_TASK_ID)
    reason: str = Field(default="", max_length=2000)
    parent_task_id: str | None = Field(
        default=None,
        max_length=MAX_TASK_ID,
        description="A child task undone by its parent: the parent, which must be this clean-up's own parent"
        " workflow and be compensating (cleanup.plan checks it in Temporal and the state store).",
    )
    parent_step: str | None = Field(default=None, max_length=64, description="The parent's child step.")


class CleanupInput(BaseModel):
    """What ``CleanupWorkflow`` needs to undo a dead task: only what the mirror recorded."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    task_type: str
    payload: dict[str, Any]
    steps: list[CleanupStep]
    compensation_policy: StepPolicyValues = StepPolicyValues(max_attempts=5)
    reason: str = ""
    chain_id: str | None = Field(
        default=None, description="The dead task's chain of runs: its rows take only its writes."
    )
    parent_task_id: str | None = Field(default=None, description="Set by a parent undoing its child.")
    parent_step: str | None = None
