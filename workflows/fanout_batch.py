"""One batch of a fan-out step, as a child workflow of the task's Scheduler: each item's Agent
called under the item's own idempotency key, at most ``max_concurrency`` at once, each with the
step's quick retries (or, for an undo, the task's compensation policy). An item that fails after
them, or for good, is ``failed`` (``compensation_failed`` for an undo); the batch never waits
for a decision, the parent weighs the failures against the step's tolerance.

A batch holds its items' calls in its own history (a few events each), so that a thousand items
cost the parent a few events per batch. Nothing here reads the task type: the batch is given
the Agent's name, the items and the policy, so it replays whatever the type has become.

A batch runs only for its task: started by the task's Scheduler, or (an undo batch) by the
task's clean-up. One started by hand (``temporal workflow start --type FanOutBatch``), or by
another workflow, calls nothing and fails, non-retryably, saying who started it.

Told to stop starting (the parent's ``stop_starting`` signal: the task is being undone, or the
step is past its tolerance), a forward batch starts no more items: those under way are waited
for and answered as ever, those not begun are answered ``not_started``, never called."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import MirrorStamp, StepCall
    from sas.task_models.fanout import (
        BATCH_REFUSED,
        FAN_OUT_BATCH_WORKFLOW,
        PROGRESS_QUERY,
        STOP_STARTING,
        BatchProgress,
        FanOutBatch,
        FanOutBatchResult,
        FanOutItem,
        ItemOutcome,
        ItemState,
    )
    from sas.task_models.ids import cleanup_workflow_id
    from sas.task_models.queues import service_of, service_queue
    from sas.workflows.shell.agents import (
        FOREIGN_RESULT,
        HELD_IN_SERVICE_QUEUE,
        describe,
        foreign_claim,
        held_cause,
        start_agent,
    )


@workflow.defn(name=FAN_OUT_BATCH_WORKFLOW)
class FanOutBatchWorkflow:
    def __init__(self) -> None:
        self._stop_starting = False
        self._batch: FanOutBatch | None = None
        self._ended: dict[str, int] = {}

    @workflow.query(name=PROGRESS_QUERY)
    def progress(self) -> BatchProgress:
        """How many of its items have ended so far, by state: `sas status` reads it while the
        batch runs, since the parent learns its items' outcomes only when the batch answers."""
        batch = self._batch
        return BatchProgress(step=batch.step if batch else "", undo=batch.undo if batch else False, ended=self._ended)

    @workflow.signal(name=STOP_STARTING)
    def stop_starting(self) -> None:
        """Start no more items. It carries nothing to validate; the parent, which knows whether
        it asked, takes a ``not_started`` answer it did not ask for as a failure."""
        self._stop_starting = True

    @workflow.run
    async def run(self, batch: FanOutBatch) -> FanOutBatchResult:
        refused = _not_its_tasks(batch, workflow.info().parent)
        if refused is not None:
            raise ApplicationError(refused, type=BATCH_REFUSED, non_retryable=True)
        self._batch = batch
        slots = asyncio.Semaphore(batch.max_concurrency)

        async def one(item: FanOutItem) -> ItemOutcome:
            async with slots:
                # Checked before the item's first call only: an item once started may have had its
                # effect, and is answered (and so undone) as ever.
                if self._stop_starting and not batch.undo:
                    outcome = ItemOutcome(key=item.key, state="not_started")
                else:
                    outcome = await self._call(batch, item)
            self._ended[outcome.state] = self._ended.get(outcome.state, 0) + 1
            return outcome

        outcomes = list(await asyncio.gather(*(one(i) for i in batch.items)))
        if not batch.short_answer:
            return FanOutBatchResult(outcomes=outcomes)
        hoped: ItemState = "compensated" if batch.undo else "processed"
        return FanOutBatchResult(outcomes=[o for o in outcomes if o.state != hoped or o.error], others=hoped)

    async def _call(self, batch: FanOutBatch, item: FanOutItem) -> ItemOutcome:
        key = f"{batch.step_key}:{item.key}"
        call = StepCall(
            task_id=batch.task_id,
            task_type=batch.task_type,
            step=batch.step,
            position=batch.position,
            idempotency_key=f"{key}:undo" if batch.undo else key,
            target_key=key if batch.undo else None,
            compensation=batch.undo,
            payload=item.item,
            stamp=MirrorStamp(seq=0, chain_id=batch.chain_id),
            item_key=item.key,
        )
        verb = "undo" if batch.undo else batch.agent.rpartition(".")[2] or batch.step
        queue = batch.task_queue
        while True:
            handle = start_agent(
                batch.agent,
                call,
                task_queue=queue,
                policy=batch.policy,
                summary=f"{verb} {batch.step} item {item.key}",
            )
            state = "compensation_failed" if batch.undo else "failed"
            try:
                foreign = foreign_claim(batch.agent, call, await handle)
                if foreign is not None:
                    # Not the Agent's answer: the item's outcome is not known, as after a lost
                    # answer, and is weighed (and undone, its lookup deciding) as a failure.
                    return ItemOutcome(key=item.key, state=state, error=foreign, error_type=FOREIGN_RESULT)
                return ItemOutcome(key=item.key, state="compensated" if batch.undo else "processed")
            except ActivityError as err:
                if held_cause(err) is not None:
                    # Not a failure: its service's breaker holds it, or every slot of its service
                    # is busy. Started again, it waits in the service's own queue until the
                    # service's worker takes it (on the workflow's queue before this patch, after
                    # a pause: histories so recorded replay so).
                    if queue is None and workflow.patched(HELD_IN_SERVICE_QUEUE):
                        queue = service_queue(workflow.info().task_queue, service_of(batch.agent))
                    elif queue is None:
                        await workflow.sleep(timedelta(seconds=5))
                    continue
                message, error_type, _ = describe(err)
                return ItemOutcome(key=item.key, state=state, error=message, error_type=error_type)


def _not_its_tasks(batch: FanOutBatch, parent: workflow.ParentInfo | None) -> str | None:
    """Why this batch must call nothing (who started it is not its task), or None."""
    may_start = (batch.task_id, cleanup_workflow_id(batch.task_id)) if batch.undo else (batch.task_id,)
    if parent is not None and parent.workflow_id in may_start:
        return None
    who = f"workflow {parent.workflow_id}" if parent is not None else "no workflow (it was started by hand)"
    whose = "its task's Scheduler or clean-up" if batch.undo else "its task's Scheduler"
    return f"a fan-out batch of task {batch.task_id} runs only for {whose}; this one was started by {who}"
