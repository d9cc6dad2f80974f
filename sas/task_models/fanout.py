"""What a fan-out's batch child workflow is given and answers: the items of one batch, the Agent
to call for each (forward or undo), and each item's outcome. The parent Scheduler keeps only the
outcomes (a key and a few words each), so its history holds a batch's answer, not its calls."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from sas.task_models.steps import StepPolicyValues
from sas.task_models.text import ErrorText

# The workflow type of a fan-out's batches (workflows/fanout_batch.py).
FAN_OUT_BATCH_WORKFLOW = "FanOutBatch"
# The signal by which the parent tells its running batches to start no more items: the task is
# being undone, or the step is past its tolerance.
STOP_STARTING = "stop_starting"
# How a batch started by anything but its task fails (never retried).
BATCH_REFUSED = "FanOutBatchRefused"


class FanOutItem(BaseModel):
    key: str = Field(description="The item's own stable key, part of its idempotency key.")
    item: dict[str, Any] = Field(description="What the item's Agent is given as its input.")


class FanOutBatch(BaseModel):
    """One batch of a fan-out step, forward or undo."""

    task_id: str
    task_type: str
    step: str
    position: int
    step_key: str = Field(description="The step's idempotency key; an item's is <step_key>:<item key>.")
    agent: str = Field(description="The activity name to call for each item: the forward's, or the undo's.")
    undo: bool = False
    task_queue: str | None = None
    policy: StepPolicyValues
    max_concurrency: int = Field(ge=1)
    chain_id: str | None = None
    items: list[FanOutItem]


# processing: its batch has begun and not answered yet (it may have had its effect).
ItemState = Literal["processing", "processed", "failed", "compensated", "compensation_failed"]
# What a batch answers for an item: its state, or not_started (told to start no more items before
# the item's turn came, it never called the item's Agent).
ItemAnswer = Literal[ItemState, "not_started"]


class ItemOutcome(BaseModel):
    key: str
    state: ItemAnswer
    error: ErrorText | None = None
    error_type: str | None = None


class FanOutBatchResult(BaseModel):
    outcomes: list[ItemOutcome]
