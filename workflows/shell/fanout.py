"""A fan-out step (``ForEach``): the step's items run in batches, each batch a child workflow
(``workflows/fanout_batch.py``), as many batches at once as the step's ``max_concurrency``
allows. The step's row in the mirror is written here, with its items counted by state; the
items' Agents write no row of their own.

When every batch has answered: within the tolerance, the failed items are undone (their
Agents' undo, each safe to run when nothing was done) and the task goes on; past it, the step
fails for good and the task is undone, every attempted item with it. A batch that has begun is
waited for, never cancelled, so an item's call is either answered or at its complete-by when
its undo is decided. Undoing the step undoes every attempted item not undone yet, latest first;
an item whose undo fails leaves the step CompensationFailed, waiting for a decision, and a
retry undoes only the items still to undo."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, FailureError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorRequest, StepPlan, StepState, StepStatus, TaskState
    from sas.task_models.fanout import (
        FAN_OUT_BATCH_WORKFLOW,
        STOP_STARTING,
        FanOutBatch,
        FanOutBatchResult,
        FanOutItem,
        ItemOutcome,
        named_counts,
    )
    from sas.task_models.seals import FOREIGN_RESULT
    from sas.task_models.text import MAX_ERROR_TEXT, bounded
    from sas.workflows.core.fanout import (
        FanOutTally,
        batches,
        concurrency,
        keyed_items,
        run_s,
        tolerated_undo_s,
    )
    from sas.workflows.definitions import ForEach, StepContext, TaskDefinition
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.task_run import TaskRun

# The failed items' undo, while the task goes on, is tried this many times before the step is
# taken as failed past its tolerance (the task is then undone, and a failing undo waits for a
# decision as any other).
_TOLERATED_UNDO_ROUNDS = 3
INVALID_ITEMS = "InvalidItems"
PAST_TOLERANCE = "FanOutPastTolerance"
ITEM_UNDO_FAILED = "FanOutUndoFailed"
# The task undoes itself when a fan-out fails past its tolerance: recorded as the request's author.
FAN_OUT_ACTOR = "sas"
_STOP_STARTING_PATCH = "fan-out-batches-told-to-stop-starting"
NOT_STARTED_FROM_OUTSIDE = "BatchStoppedFromOutside"


@dataclass
class _Told:
    """A wave's running batches (their handles, once started), and whether they were told to stop
    starting items."""

    running: dict[str, workflow.ChildWorkflowHandle[Any, FanOutBatchResult]] = field(default_factory=dict)
    stopping: bool = False


async def _stop_starting(handle: workflow.ChildWorkflowHandle[Any, FanOutBatchResult]) -> None:
    try:
        await handle.signal(STOP_STARTING)
    except FailureError:
        pass  # it answered meanwhile: nothing left to start


def _told_from_outside(key: str) -> ItemOutcome:
    return ItemOutcome(
        key=key,
        state="failed",
        error="its batch was told to start no more items, not by this task (a signal from outside)",
        error_type=NOT_STARTED_FROM_OUTSIDE,
    )


class FanOut:
    """Runs and undoes a task's fan-out steps; the state of each is its items' tally."""

    def __init__(self, definition: TaskDefinition, run: TaskRun, decisions: Decisions) -> None:
        self.definition = definition
        self.run = run
        self.decisions = decisions
        self._tallies: dict[str, FanOutTally] = {}
        self._items: dict[str, dict[str, FanOutItem]] = {}
        # The items whose forward call failed, of each step: an undone one is still a failure.
        self._failed: dict[str, set[str]] = {}
        self._batch_rounds = 0

    def owns(self, name: str) -> bool:
        """Whether ``name`` is a fan-out step."""
        return isinstance(self.definition.step(name), ForEach)

    async def step(self, name: str, step: ForEach) -> None:
        core, records = self.run.core, self.run.records
        keyed = self._keyed(step)
        records.advance()
        status = core.start(name)
        if isinstance(keyed, str):
            core.set(name, note=f"cannot fan out: {keyed}")
            await self._fail_for_good(status, keyed, INVALID_ITEMS)
            return
        tally = FanOutTally(total=len(keyed), tolerance=step.tolerate)
        self._tallies[name], self._items[name] = tally, {i.key: i for i in keyed}
        per_batch, at_once = concurrency(step.max_concurrency, step.batch_size)
        cut = batches(keyed, step.batch_size)
        self._show(status, tally)
        self.run.event(f"{name}: {len(keyed)} items in {len(cut)} batches, {step.max_concurrency} at once at most")
        # Its complete-by: as long as its items may run, wave after wave, and its tolerated
        # failures' undo, so that a fan-out that overruns it is seen as any step that overruns.
        deadline = self._deadline(name, step, tally, len(keyed))
        await records.mirror(
            [records.transition(status, task_state=core.status.state, note=status.note, complete_by=deadline)]
        )
        for start in range(0, len(cut), at_once):
            if core.compensating or tally.past_tolerance():
                break  # what has begun is undone; the batches not begun never are
            wave = cut[start : start + at_once]
            for items in wave:
                tally.begin(items)
            # The wave's items shown processing while it runs (`sas status` adds those its
            # batches have answered so far): current details and a query, no event.
            self._show(status, tally)
            await self._wave(name, wave, start, per_batch, tally)
            self._show(status, tally)
            # The counts in the mirror too, once a wave: `sas show` reads them there; and the
            # complete-by of the waves still to run.
            records.advance()
            left = sum(len(b) for b in cut[start + at_once :])
            deadline = self._deadline(name, step, tally, left)
            await records.mirror(
                [records.transition(status, note=status.note, result=status.result, complete_by=deadline)]
            )
        if core.compensating:
            return  # undone with the other steps
        if not tally.past_tolerance() and tally.failed():
            await self._undo_tolerated(name, tally, per_batch)
        if tally.past_tolerance() or tally.count("compensation_failed"):
            failed = len(tally.failed()) + tally.count("compensation_failed")
            why = (
                f"{failed} of {tally.total} items failed, more than the {tally.allowed} it may: {tally.first_errors()}"
            )
            core.set(name, note=tally.describe())
            await self._fail_for_good(status, why, PAST_TOLERANCE)
            return
        records.advance()
        result: dict[str, object] = dict(self._counts(name, tally))
        core.set(name, note=tally.describe(), result=result)
        self.run.results[name] = dict(result)
        task_state = core.done(name)
        self.run.publish()
        self.run.event(f"{name}: {status.note}")
        await records.mirror([records.transition(status, task_state=task_state, note=status.note, result=result)])
        self.run.notify("step_completed", name)

    async def undo(self, name: str) -> None:
        """Undo every attempted item not undone yet, latest first, in batches; an item whose undo
        fails leaves the step CompensationFailed until a decision."""
        core, records, plan = self.run.core, self.run.records, self.run.plans[name]
        step = self.definition.step(name)
        assert isinstance(step, ForEach)
        tally = self._tallies.get(name) or FanOutTally(total=0, tolerance=step.tolerate)
        status = core.step(name)
        while True:
            records.advance()
            undoing = f"undoing {len(tally.to_undo())} items: " + tally.describe()
            self.run.set(name, StepState.COMPENSATING, TaskState.COMPENSATING, note=undoing)
            # As long as its items' undo may run: an undo that overruns it is seen as any other.
            undo_s = run_s(self.run.compensation_policy, len(tally.to_undo()), step.max_concurrency, step.batch_size)
            until = workflow.now() + timedelta(seconds=max(undo_s, self.run.compensation_policy.complete_by_s))
            await records.mirror(
                [records.transition(status, task_state=TaskState.COMPENSATING, note=status.note, complete_by=until)]
            )
            per_batch, _ = concurrency(step.max_concurrency, step.batch_size)
            await self._undo_items(name, tally, tally.to_undo(), per_batch, plan)
            self._show(status, tally)
            if not tally.count("compensation_failed"):
                records.advance()
                self.run.set(name, StepState.COMPENSATED, note=tally.describe())
                await records.mirror([records.transition(status, note=status.note, result=status.result)])
                return
            records.advance()
            failed = tally.count("compensation_failed")
            message = bounded(f"the undo of {failed} items failed: {tally.first_errors()}", MAX_ERROR_TEXT)
            step_now, task_state = core.record_failure(
                name, StepState.COMPENSATION_FAILED, message, ITEM_UNDO_FAILED, False
            )
            self.run.publish()
            self.run.event(f"{name}: CompensationFailed: {message}")
            self.run.notify("failed", name, message)
            await records.mirror([records.transition(step_now, task_state=task_state, complete_by=workflow.now())])
            await self.decisions.wait_for(name, compensating=True)

    # ------------------------------------------------------------ the parts

    def _deadline(self, name: str, step: ForEach, tally: FanOutTally, left: int) -> datetime:
        """When the fan-out's forward overruns: ``left`` items still to run (``run_s``), then the
        undo of the failures it tolerates; at least one item's complete-by from now."""
        plan = self.run.plans[name]
        policy = plan.resolved_policy
        forward = run_s(policy, left, step.max_concurrency, step.batch_size)
        undo = 0.0
        if plan.compensation is not None:
            undo = tolerated_undo_s(
                self.run.compensation_policy,
                tally.allowed,
                step.max_concurrency,
                step.batch_size,
                _TOLERATED_UNDO_ROUNDS,
            )
        return workflow.now() + timedelta(seconds=max(forward + undo, policy.complete_by_s))

    def _keyed(self, step: ForEach) -> list[FanOutItem] | str:
        try:
            listed = step.items(StepContext(input=self.run.payload, results=self.run.results))
        except Exception as err:  # noqa: BLE001 - a team's function over its own data: said, not raised
            return f"its items could not be read: {type(err).__name__}: {err}"
        return keyed_items(listed, step.key)

    async def _undo_tolerated(self, name: str, tally: FanOutTally, per_batch: int) -> None:
        plan = self.run.plans[name]
        for round_ in range(_TOLERATED_UNDO_ROUNDS):
            keys = tally.to_undo([k for k, s in tally.states.items() if s in ("failed", "compensation_failed")])
            if not keys:
                return
            if round_:
                await workflow.sleep(timedelta(seconds=2**round_))
            self.run.event(f"{name}: undoing the {len(keys)} failed items, within the {tally.allowed} it may fail")
            await self._undo_items(name, tally, keys, per_batch, plan)

    async def _wave(
        self, name: str, wave: list[list[FanOutItem]], start: int, per_batch: int, tally: FanOutTally
    ) -> None:
        """The wave's batches at once, each one's answer taken as it comes. Once the task is being
        undone, or the step is past its tolerance, the batches still running are told to start no
        more items: what has begun is waited for (and undone with the rest), what has not is
        never called. Cancelled (the workflow's cancellation), the batches are cancelled with it."""
        core = self.run.core
        told = _Told()

        async def answered(index: int, items: list[FanOutItem]) -> None:
            outcomes = await self._batch(name, items, undo=False, per_batch=per_batch, index=index, told=told)
            if not told.stopping:
                # Not asked by this task: someone else signalled the batch. Its items were never
                # called, but the step will not go on as if they had been paid: they are failures.
                outcomes = [o if o.state != "not_started" else _told_from_outside(o.key) for o in outcomes]
            tally.take(outcomes)
            self._failed.setdefault(name, set()).update(o.key for o in outcomes if o.state == "failed")

        answering = asyncio.gather(*(answered(start + i, items) for i, items in enumerate(wave)))
        try:
            await workflow.wait_condition(lambda: answering.done() or core.compensating or tally.past_tolerance())
        except asyncio.CancelledError:
            answering.cancel()
            await asyncio.gather(answering, return_exceptions=True)
            raise
        # A history recorded before batches were told this replays as it ran: no signal.
        if not answering.done() and workflow.patched(_STOP_STARTING_PATCH):
            told.stopping = True
            await asyncio.gather(*(_stop_starting(handle) for handle in list(told.running.values())))
        await answering

    async def _undo_items(self, name: str, tally: FanOutTally, keys: list[str], per_batch: int, plan: StepPlan) -> None:
        if plan.compensation is None:
            # Read-only or irreversible items: nothing to call, nothing to undo.
            tally.take([ItemOutcome(key=k, state="compensated") for k in keys])
            return
        items = [self._items[name][k] for k in keys]
        step = self.definition.step(name)
        assert isinstance(step, ForEach)
        _, at_once = concurrency(step.max_concurrency, step.batch_size)
        cut = batches(items, step.batch_size)
        for start in range(0, len(cut), at_once):
            wave = cut[start : start + at_once]
            answers = await asyncio.gather(
                *(
                    self._batch(name, part, undo=True, per_batch=per_batch, index=start + i)
                    for i, part in enumerate(wave)
                )
            )
            for outcomes in answers:
                tally.take(outcomes)

    async def _batch(
        self,
        name: str,
        items: list[FanOutItem],
        *,
        undo: bool,
        per_batch: int,
        index: int,
        told: _Told | None = None,
    ) -> list[ItemOutcome]:
        """One batch as a child workflow; its items' outcomes. A batch that ended otherwise than
        by answering (terminated from outside) counts each of its items as failed: each may have
        had its effect, so each is undone."""
        plan = self.run.plans[name]
        agent = plan.compensation if undo else plan.agent
        assert agent is not None
        self._batch_rounds += 1
        kind = "undo" if undo else "batch"
        batch = FanOutBatch(
            task_id=self.run.core.status.task_id,
            task_type=self.run.core.status.task_type,
            step=name,
            position=plan.position,
            step_key=plan.idempotency_key,
            agent=agent,
            undo=undo,
            task_queue=plan.task_queue,
            policy=self.run.compensation_policy if undo else plan.resolved_policy,
            max_concurrency=per_batch,
            chain_id=self.run.records.chain_id,
            items=items,
            short_answer=True,
        )
        child_id = f"{plan.idempotency_key}:{kind}-{self._batch_rounds}"
        try:
            handle = await workflow.start_child_workflow(
                FAN_OUT_BATCH_WORKFLOW,
                batch,
                id=child_id,
                result_type=FanOutBatchResult,
                static_summary=f"{name}: {kind} {index + 1}, {len(items)} items",
            )
            if told is not None:
                told.running[child_id] = handle
                if told.stopping:
                    # Started after the others were told: told at once, before it answers.
                    await _stop_starting(handle)
            answer = await handle
            for outcome in answer.outcomes:
                if outcome.error_type == FOREIGN_RESULT:
                    await self.run.audit_refused_result(name, f"item {outcome.key}: {outcome.error}")
            return answer.of(items)
        except ChildWorkflowError as err:
            state = "compensation_failed" if undo else "failed"
            message = bounded(f"its batch ended: {err.cause or err}", MAX_ERROR_TEXT)
            return [ItemOutcome(key=i.key, state=state, error=message, error_type="BatchEnded") for i in items]
        finally:
            if told is not None:
                told.running.pop(child_id, None)

    def _show(self, status: StepStatus, tally: FanOutTally) -> None:
        """The counts in the task's status (``sas status``, the query, the UI), as they change."""
        self.run.core.set(status.name, result=self._counts(status.name, tally), note=tally.describe())
        self.run.publish()

    def _counts(self, name: str, tally: FanOutTally) -> dict[str, int]:
        """The step's result: its counts by state, with the limit named ``tolerance`` and the
        items that failed counted (``failed_items``); ``tolerated``, the limit too, stays for the
        readers of results written before."""
        # No patch: the counts travel in the step's result (an activity's input, a query's answer,
        # the task's result), never in a command, so a history recorded before replays the same
        # with them; a patch marker would be the one new command, and a query's replay of the
        # marked histories on the time-skipping server failed on it.
        return named_counts(tally.counts(), failed_items=len(self._failed.get(name, ())))

    async def _fail_for_good(self, status: StepStatus, why: str, error_type: str) -> None:
        """The fan-out cannot go on: the step is Failed for good and the task is undone at once
        (no decision would change the items' answers)."""
        records = self.run.records
        records.advance()
        message = bounded(why, MAX_ERROR_TEXT)
        step, task_state = self.run.core.record_failure(status.name, StepState.FAILED, message, error_type, True)
        self.run.publish()
        self.run.event(f"{status.name}: Failed ({error_type}): {message}")
        self.run.notify("failed", status.name, f"{error_type}: {message}")
        await records.mirror([records.transition(step, task_state=task_state, note=status.note, result=status.result)])
        self.decisions.start_compensation(
            OperatorRequest(by=FAN_OUT_ACTOR, reason=bounded(f"{status.name}: {why}", 2000))
        )
