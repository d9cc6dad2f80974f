"""A dead task's fan-out items, for its clean-up: which items each fan-out step attempted, read
from the batches its Scheduler started (each ``StartChildWorkflowExecutionInitiated`` event of a
``FanOutBatch`` holds the batch's items). An item's Agent writes no row of its own, so only the
Scheduler's history knows them; if it cannot be read, the steps that look like fan-outs are
given the reason instead, and the clean-up leaves them for an operator rather than call them undone."""

from __future__ import annotations

import re

from temporalio import activity
from temporalio.api.common.v1 import Payloads
from temporalio.service import RPCError, RPCStatusCode

from sas.state_store.queries import TaskRecord
from sas.task_models.cleanup import CleanupInput, FanOutItems
from sas.task_models.fanout import FAN_OUT_BATCH_WORKFLOW, FanOutBatch, FanOutItem

# A fan-out step's note, as its Scheduler writes it (core/fanout.py, FanOutTally.describe).
_FAN_OUT_NOTE = re.compile(r"^(undoing \d+ items: )?\d+ items: ")


async def attempted_items(record: TaskRecord) -> dict[str, FanOutItems]:
    """Each fan-out step's attempted items, in the order attempted; raises if Temporal is away."""
    handle = activity.client().get_workflow_handle(record.task.task_id, run_id=record.task.run_id)
    converter = activity.client().data_converter
    found: dict[str, FanOutItems] = {}
    seen: dict[str, set[str]] = {}
    try:
        async for event in handle.fetch_history_events():
            if not event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                continue
            started = event.start_child_workflow_execution_initiated_event_attributes
            if started.workflow_type.name != FAN_OUT_BATCH_WORKFLOW:
                continue
            batch = (await converter.decode(_payloads(started.input), [FanOutBatch]))[0]
            if batch.undo:
                continue  # its items were attempted by a forward batch before
            step = found.setdefault(
                batch.step, FanOutItems(batch_size=max(1, len(batch.items)), max_concurrency=batch.max_concurrency)
            )
            keys = seen.setdefault(batch.step, set())
            step.items.extend(FanOutItem(key=i.key, item=i.item) for i in batch.items if i.key not in keys)
            keys.update(i.key for i in batch.items)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise  # Temporal unreachable: the activity is retried
        why = f"the history of workflow {record.task.task_id} is gone: {err.message}"
        return {s.name: FanOutItems(error=why) for s in record.steps if _FAN_OUT_NOTE.match(s.note or "")}
    return found


def with_fan_outs(plan: CleanupInput, fan_outs: dict[str, FanOutItems]) -> CleanupInput:
    steps = [s.model_copy(update={"fan_out": fan_outs[s.name]}) if s.name in fan_outs else s for s in plan.steps]
    return plan.model_copy(update={"steps": steps})


def _payloads(given: Payloads) -> list:  # type: ignore[type-arg]
    return list(given.payloads)
