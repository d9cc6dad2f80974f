"""What a fan-out's batch child workflow is given and answers: the items of one batch, the Agent
to call for each (forward or undo), and each item's outcome. The parent Scheduler keeps only the
outcomes (a key and a few words each), so its history holds a batch's answer, not its calls."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from sas.task_models.plans import StepPolicyValues
from sas.task_models.text import ErrorText

if TYPE_CHECKING:
    from temporalio.api.workflow.v1 import PendingActivityInfo
    from temporalio.client import Client

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
    short_answer: bool = Field(
        default=False,
        description="Answer the items that ended as hoped (processed; compensated, for an undo) as one count"
        " (FanOutBatchResult.others), listing the rest: so a batch's answer in its parent's history grows with its"
        " failures, not with its items. Set by a parent that reads such answers; a batch started by one before it"
        " lists every item.",
    )


# processing: its batch has begun and not answered yet (it may have had its effect).
ItemState = Literal["processing", "processed", "failed", "compensated", "compensation_failed"]
# What a batch answers for an item: its state, or not_started (told to start no more items before
# the item's turn came, it never called the item's Agent).
ItemAnswer = Literal[ItemState, "not_started"]
# The states an item's row of counts is given in, in the order they are shown.
ITEM_STATES: tuple[ItemState, ...] = ("processing", "processed", "failed", "compensated", "compensation_failed")


class ItemOutcome(BaseModel):
    key: str
    state: ItemAnswer
    error: ErrorText | None = None
    error_type: str | None = None


class FanOutBatchResult(BaseModel):
    outcomes: list[ItemOutcome]
    others: ItemState | None = Field(
        default=None,
        description="The state of every item of the batch not in outcomes (a short answer); None: outcomes lists all.",
    )

    def of(self, items: list[FanOutItem]) -> list[ItemOutcome]:
        """Each of the batch's ``items``' outcomes, a short answer's ``others`` given their own."""
        if self.others is None:
            return self.outcomes
        listed = {o.key for o in self.outcomes}
        return [*self.outcomes, *(ItemOutcome(key=i.key, state=self.others) for i in items if i.key not in listed)]


# The batch's query of the items that have ended so far (``BatchProgress``): read by `sas status`
# while the batch runs, so a wave's counts move as each item ends at no cost in history (a query
# is not recorded), where a signal to the parent per item would cost both histories events.
PROGRESS_QUERY = "progress"


class BatchProgress(BaseModel):
    """What a running batch has answered so far: its step, whether it undoes, and how many of its
    items have ended in each state (``not_started`` included)."""

    step: str
    undo: bool = False
    ended: dict[str, int] = Field(default_factory=dict)


# The counts a fan-out step's result gives besides its states: not states of an item.
# ``tolerance`` is how many items may fail; ``failed_items`` how many did (undone since, within the
# tolerance, or not); ``tolerated`` is the tolerance under its first name, kept in every result so
# that a reader of results written before (which have it alone) reads both alike.
_NOT_STATES = ("items", "tolerance", "failed_items", "tolerated")


def named_counts(counts: dict[str, int], *, failed_items: int) -> dict[str, int]:
    """A fan-out step's result from its tally's counts (``items``, ``tolerated``, then one count per
    item state): the tolerance under its own name and the failed items counted, beside the rest."""
    named = {"items": counts.get("items", 0), "tolerance": tolerance_of(counts), "failed_items": failed_items}
    return named | counts


def tolerance_of(counts: dict[str, Any]) -> int:
    """How many items a fan-out step may fail, from its result: ``tolerance``, or in a result
    written before it was named so, ``tolerated``."""
    return int(counts.get("tolerance", counts.get("tolerated", 0)))


def describe_counts(counts: dict[str, int]) -> str:
    """One line for a fan-out step's note, from its counts (its result):
    ``40 items: 37 processed, 3 compensated (3 may fail)``."""
    parts = [f"{n} {state.replace('_', ' ')}" for state, n in counts.items() if state not in _NOT_STATES]
    return f"{counts.get('items', 0)} items: {', '.join(parts) or 'none started'} ({tolerance_of(counts)} may fail)"


def with_ended(counts: dict[str, int], ended: dict[str, int]) -> dict[str, int]:
    """A forward fan-out's counts with the items its running batches have answered so far: an
    item its parent still counts as ``processing`` is shown in the state it ended in."""
    shown = dict(counts)
    for state, n in ended.items():
        moved = min(n, shown.get("processing", 0))
        shown["processing"] = shown.get("processing", 0) - moved
        shown[state] = shown.get(state, 0) + moved
    # In the order the Scheduler gives them (workflows/core/fanout.py), a state none is in left out.
    order = (*_NOT_STATES, *ITEM_STATES, "not_started")
    return {k: shown[k] for k in order if k in shown and (shown[k] or k in _NOT_STATES)}


def running_batches(description: Any) -> list[str]:
    """The ids of the fan-out batches a workflow's description (``raw_description`` of
    ``describe()``) shows running as its children: a Scheduler's, or a clean-up's undo batches."""
    return [c.workflow_id for c in description.pending_children if c.workflow_type_name == FAN_OUT_BATCH_WORKFLOW]


# Batches described at once: a wide fan-out (max_concurrency 1000, batches of 1) runs a thousand.
_BATCH_LOOKS = 16


async def batch_activities(client: Client, batch_ids: list[str]) -> dict[str, list[PendingActivityInfo]]:
    """Each running batch's pending activities, its items' calls (a batch closed meanwhile is
    left out). The Supervisor's look and the task client's retry and compensate all read a
    fan-out's items so, as ``pauses.is_paused`` says which of them are paused."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError, RPCStatusCode

    slots = asyncio.Semaphore(_BATCH_LOOKS)

    async def one(batch_id: str) -> list[PendingActivityInfo] | None:
        async with slots:
            try:
                described = await client.get_workflow_handle(batch_id).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return None
                raise
        if described.status != WorkflowExecutionStatus.RUNNING:
            return None
        return list(described.raw_description.pending_activities)

    found = await asyncio.gather(*(one(b) for b in batch_ids))
    return {b: items for b, items in zip(batch_ids, found, strict=True) if items is not None}
