"""The forward run: a task's stages in order - a step, or a parallel group whose steps start
together (a group with branches is walked by ``shell/branches.py``) - each step through its Agent (or, a wait step, through ``shell/waits.py``), until the
task completes or is to be undone.

When a step fails after its Agent's quick retries it is recorded as Failed and waits for a
decision (``retry``, ``compensate`` or ``park``) from the Supervisor or an operator
(``shell/decisions.py``); the Scheduler never gives up on its own.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        OperatorRequest,
        StepPlan,
        StepResult,
        StepState,
        StepStatus,
        StepTransition,
        TaskState,
    )
    from sas.task_models.activity_defs import agent_result
    from sas.task_models.results import shown
    from sas.workflows.core.machine import DECISION_STATES
    from sas.workflows.definitions import (
        ChildTask,
        ForEach,
        Parallel,
        StepContext,
        StepDefinition,
        TaskDefinition,
        Wait,
    )
    from sas.workflows.shell.agents import (
        cancelled,
        foreign_claim,
        held_by_service,
        start_agent,
        step_call,
        until_ended,
    )
    from sas.workflows.shell.branches import BranchRunner
    from sas.workflows.shell.children import Children
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.fanout import FanOut
    from sas.workflows.shell.task_run import TaskRun
    from sas.workflows.shell.waits import Waits
    from sas.workflows.summaries import step_summary

_DONE = (StepState.PROCESSED, StepState.SKIPPED)


class StepRunner:
    """Runs a task's steps forward."""

    def __init__(
        self,
        definition: TaskDefinition,
        run: TaskRun,
        decisions: Decisions,
        waits: Waits,
        fan_out: FanOut,
        children: Children,
    ) -> None:
        self.definition = definition
        self.fan_out = fan_out
        self.run = run
        self.decisions = decisions
        self.waits = waits
        self.children = children
        # Whether a cancelled attempt is waited for until it has ended: recorded with the plan,
        # not a patch marker (one more event on every task's happy path); a plan accepted before
        # it was waited for says False, and replays cancelling at once.
        self.waits_for_cancelled = False

    async def all_stages(self) -> None:
        """Run the stages until the task completes or is to be undone (the core then says
        ``compensating``): by a decision, an approval refused, or the workflow cancelled."""
        core = self.run.core
        while True:
            try:
                await self._stages()
                return
            except asyncio.CancelledError:
                past = None if core.compensating else core.past_pivot()
                if past is not None:
                    # Past the pivot a cancellation is a compensate like any other, and refused
                    # the same way: the task goes on from where it was (a plan without a pivot
                    # never gets here, so its histories replay as they ran).
                    self.run.event(f"workflow cancellation refused: past the point of no return: {past}; going on")
                    continue
                # Cancelling the workflow (UI, CLI) means: undo what was done, then stop.
                self.run.event("workflow cancellation requested: compensating")
                if not core.compensating:
                    core.begin_compensation(OperatorRequest(by="temporal", reason="workflow cancelled"))
                return

    async def finish(self) -> None:
        """The task completed. Its completion is in the mirror already when the Agent of a last
        stage's only step wrote it; otherwise (a parallel group, a wait or a skipped step last)
        it is written here."""
        run = self.run
        core, records = run.core, run.records
        last = core.stages()[-1]
        if len(last) == 1 and not core.planned(last[0]).wait and core.step(last[0]).state == StepState.PROCESSED:
            return
        run.set_task(TaskState.PROCESSED)
        records.advance()
        carrier = core.step(core.completed[-1]) if core.completed else core.status.steps[-1]
        await records.mirror([records.transition(carrier, task_state=TaskState.PROCESSED, note=carrier.note)])

    async def _stages(self) -> None:
        core = self.run.core
        earlier: list[str] = []
        for stage in core.stages():
            if core.compensating:
                return
            group = self.definition.stage_item(stage[0])
            if isinstance(group, Parallel) and group.branched:
                # A group with branches is walked as declared (shell/branches.py); a plain group
                # runs below, as it always did.
                await BranchRunner(core, self._step, self._skip_unless_wanted).run(group, earlier)
                earlier = earlier + stage
                continue
            # Run again after a refused cancellation (past the pivot), the stages done stay done.
            left = [n for n in stage if core.step(n).state not in _DONE]
            runnable = await self._skip_unless_wanted(left) if left else []
            if len(runnable) == 1:
                await self._step(runnable[0], earlier)
            elif runnable:
                await asyncio.gather(*(self._step(name, earlier) for name in runnable))
            earlier = earlier + stage

    async def _skip_unless_wanted(self, stage: list[str]) -> list[str]:
        """The stage's steps whose condition holds; the others are Skipped, with the reason."""
        run = self.run
        context = StepContext(input=run.payload, results=run.results)
        runnable: list[str] = []
        skipped: list[StepTransition] = []
        for name in stage:
            when = self.definition.step(name).when
            if when is None or when.predicate(context):
                runnable.append(name)
                continue
            if not skipped:
                run.records.advance()
            step = run.core.skip(name, f"skipped: {when.unless}")
            run.publish()
            run.event(f"{name}: {step.note}")
            skipped.append(run.records.transition(step, note=step.note))
        if skipped:
            await run.records.mirror(skipped)
        return runnable

    async def _step(self, name: str, earlier: list[str]) -> None:
        step = self.definition.step(name)
        if isinstance(step, Wait):
            await self.waits.step(name, step)
        elif isinstance(step, ForEach):
            await self.fan_out.step(name, step)
        elif isinstance(step, ChildTask):
            await self.children.step(name, step)
        else:
            await self._forward(name, earlier)

    async def _forward(self, name: str, earlier: list[str]) -> None:
        """One step through its Agent, attempt after attempt, until it is done or undoing begins."""
        run = self.run
        core, records = run.core, run.records
        plan = run.plans[name]
        # The Agent of the only step of the last stage records the task's completion with its own.
        completes = core.stages()[-1] == [name]
        # Resumed after a refused cancellation while the step waited for a decision: it still does.
        resumed = core.step(name).state in DECISION_STATES
        decided = await self.decisions.wait_for(name, compensating=False) if resumed else "retry"
        if decided in ("compensate", "skip"):
            return
        if decided == "complete":
            await self._completed_by_hand(plan, name)
            return
        queue = plan.task_queue  # a held attempt starts again on its service's own (held_by_service)
        # Only the results its Agent reads: less in each call's history event, and no other
        # step's result (a charge's secret fields) reaches an Agent that has no use for it.
        declared = self.definition.step(name)
        reads = declared.reads if isinstance(declared, StepDefinition) else None
        sent = earlier if reads is None else [n for n in earlier if n in reads]
        while not core.compensating:
            records.advance()
            step = core.start(name)
            run.publish()
            call = step_call(
                core.status,
                plan,
                records,
                run.call_payload,
                run.results,
                compensation=False,
                task_state_on_done=TaskState.PROCESSED if completes else None,
                earlier=sent,
            )
            waits = self.waits_for_cancelled
            handle = start_agent(
                plan.agent,
                call,
                task_queue=queue,
                policy=plan.resolved_policy,
                summary=step_summary(name, plan.agent, run.payload, run=step.runs, failure_count=step.failure_count),
                wait_when_cancelled=waits,
                compact=run.compact_calls,
            )
            run.inflight[name] = handle
            try:
                done = await (until_ended(handle) if waits else handle)
                foreign = foreign_claim(plan.agent, call, done)
                if foreign is None:
                    self._keep_result(plan, step, done)
                    core.done(name)
                    run.publish()
                    run.notify("step_completed", name)
                    return
                await run.refuse_result(name, StepState.FAILED, foreign)
            except ActivityError as err:
                # Once undoing has begun, however the attempt ended (cancelled, or its complete-by
                # passed while its request was answered) it is undone with the others, not failed.
                if cancelled(err) or (waits and core.compensating):
                    if core.compensating:
                        return  # undone below, with the others: the attempt may have had its effect
                    raise asyncio.CancelledError() from err  # the workflow itself is being cancelled
                held = await held_by_service(queue, plan.agent, name, err, run.event)
                if held is not None:
                    queue = held.queue
                    continue  # not a failure: started again, to wait in the service's queue
                await run.record_failure(name, StepState.FAILED, err)
            finally:
                run.inflight.pop(name, None)
            decided = await self.decisions.wait_for(name, compensating=False)
            if decided in ("compensate", "skip"):
                return
            if decided == "complete":
                await self._completed_by_hand(plan, name)
                return

    async def _completed_by_hand(self, plan: StepPlan, name: str) -> None:
        """The step done with the result an operator gave (``request_complete``): kept like an
        Agent's, and written to the mirror here, since no Agent wrote it."""
        run = self.run
        core, records = run.core, run.records
        step = core.step(name)
        self._keep_result(plan, step, StepResult(data=self.decisions.completions.pop(name)))
        records.advance()
        task_state = core.done(name)
        core.set(name, note="completed by hand")
        run.publish()
        run.notify("step_completed", name)
        done = task_state if task_state == TaskState.PROCESSED else None
        await records.mirror([records.transition(step, task_state=done, note=step.note, result=step.result)])

    def _keep_result(self, plan: StepPlan, step: StepStatus, done: StepResult) -> None:
        """Keep a forward result for the later steps and the undo; show it without its secrets."""
        # No workflow.patched here: keeping a result changes no command, only the inputs of later
        # activities, which replay does not compare.
        self.run.results[plan.name] = done.data
        model = agent_result(plan.agent)
        self.run.core.set(step.name, result=shown(model, done.data) if model is not None else done.data)
