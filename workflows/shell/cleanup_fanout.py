"""A fan-out step's undo in the clean-up (``workflows/cleanup.py``): the dead Scheduler's
attempted items (``cleanup.plan`` read them from its history) are undone each under its own key,
latest first, in undo batches as the Scheduler's ``FanOut.undo`` does; an item whose undo fails
leaves the step CompensationFailed until a decision, and a retry undoes only the items left.

If the items could not be listed, the step is never called undone: it is CompensationFailed,
waiting for an operator, with the reason in its note."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import StepState, TaskState
    from sas.task_models.cleanup import FanOutItems
    from sas.task_models.fanout import FAN_OUT_BATCH_WORKFLOW, FanOutBatch, FanOutBatchResult, FanOutItem, ItemOutcome
    from sas.task_models.text import MAX_ERROR_TEXT, bounded
    from sas.workflows.core.fanout import batches
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.fanout import ITEM_UNDO_FAILED
    from sas.workflows.shell.task_run import TaskRun

ITEMS_UNKNOWN = "FanOutItemsUnknown"


class CleanupFanOut:
    """Undoes the fan-out steps of a dead task, from the items its history listed."""

    def __init__(self, run: TaskRun, decisions: Decisions, fan_outs: dict[str, FanOutItems]) -> None:
        self.run = run
        self.decisions = decisions
        self.fan_outs = fan_outs
        self._rounds = 0

    def owns(self, name: str) -> bool:
        return name in self.fan_outs

    async def undo(self, name: str) -> None:
        core, records = self.run.core, self.run.records
        listed = self.fan_outs[name]
        status = core.step(name)
        # Latest first; each undo is safe to run when the item's call did nothing.
        left = list(reversed(listed.items)) if self.run.plans[name].compensation else []
        errors: dict[str, str] = {}
        while True:
            records.advance()
            self.run.set(name, StepState.COMPENSATING, TaskState.COMPENSATING)
            if listed.error is not None:
                await self._failed(name, f"fan-out items could not be listed: {listed.error}", ITEMS_UNKNOWN)
                continue
            core.set(name, note=f"undoing {len(left)} of {len(listed.items)} attempted items")
            await records.mirror([records.transition(status, task_state=TaskState.COMPENSATING, note=status.note)])
            outcomes: list[ItemOutcome] = []
            for part in batches(left, listed.batch_size):
                outcomes.extend(await self._batch(name, part, listed.max_concurrency))
            failed = {o.key for o in outcomes if o.state != "compensated"}
            errors = {o.key: f"{o.error_type}: {o.error}" for o in outcomes if o.key in failed}
            left = [i for i in left if i.key in failed]
            if not left:
                records.advance()
                self.run.set(name, StepState.COMPENSATED, note=f"{len(listed.items)} attempted items undone")
                await records.mirror([records.transition(status, note=status.note)])
                return
            first = "; ".join(f"{k}: {e}" for k, e in list(errors.items())[:3])
            await self._failed(name, f"the undo of {len(left)} items failed: {first}", ITEM_UNDO_FAILED)

    async def _failed(self, name: str, why: str, error_type: str) -> None:
        core, records = self.run.core, self.run.records
        records.advance()
        message = bounded(why, MAX_ERROR_TEXT)
        step, task_state = core.record_failure(name, StepState.COMPENSATION_FAILED, message, error_type, False)
        self.run.publish()
        self.run.event(f"{name}: CompensationFailed: {message}")
        self.run.notify("failed", name, message)
        await records.mirror([records.transition(step, task_state=task_state, complete_by=workflow.now())])
        await self.decisions.wait_for(name, compensating=True)

    async def _batch(self, name: str, items: list[FanOutItem], max_concurrency: int) -> list[ItemOutcome]:
        plan = self.run.plans[name]
        assert plan.compensation is not None
        self._rounds += 1
        batch = FanOutBatch(
            task_id=self.run.core.status.task_id,
            task_type=self.run.core.status.task_type,
            step=name,
            position=plan.position,
            step_key=plan.idempotency_key,
            agent=plan.compensation,
            undo=True,
            task_queue=plan.task_queue,
            policy=self.run.compensation_policy,
            max_concurrency=max_concurrency,
            chain_id=self.run.records.chain_id,
            items=items,
            short_answer=True,
        )
        try:
            answer = await workflow.execute_child_workflow(
                FAN_OUT_BATCH_WORKFLOW,
                batch,
                # Never the dead Scheduler's own batch ids (<step key>:undo-<n>).
                id=f"{plan.idempotency_key}:cleanup-undo-{self._rounds}",
                result_type=FanOutBatchResult,
                static_summary=f"{name}: clean-up undo {self._rounds}, {len(items)} items",
            )
            return answer.of(items)
        except ChildWorkflowError as err:
            message = bounded(f"its batch ended: {err.cause or err}", MAX_ERROR_TEXT)
            return [
                ItemOutcome(key=i.key, state="compensation_failed", error=message, error_type="BatchEnded")
                for i in items
            ]
