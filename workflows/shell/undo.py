"""The one undo engine, for the Scheduler and the clean-up alike: every attempted step is
undone in the order the core gives (``TaskCore.undo_order``: unfinished first, then the
completed ones in reverse order of completion), each undo where its forward step ran, with its
bulkhead and breaker. An undo that fails after its quick retries is CompensationFailed and
waits for a decision (the Supervisor's ladder, or an operator's ``retry``/``compensate``), or
is parked as Error; the same signals and updates reach it in either workflow."""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import StepState, StepTransition, TaskState
    from sas.workflows.core.children import CHILD_AGENT
    from sas.workflows.shell.agents import foreign_claim, held_by_service, shielded, start_agent, step_call
    from sas.workflows.shell.children import Children
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.task_run import TaskRun
    from sas.workflows.summaries import step_summary


class ItemsUndo(Protocol):
    """Who undoes a fan-out step's items: the Scheduler's ``FanOut``, or the clean-up's
    ``CleanupFanOut`` (from the items its dead Scheduler's history listed)."""

    def owns(self, name: str) -> bool: ...

    async def undo(self, name: str) -> None: ...


class Undo:
    """Undoes a task's attempted steps."""

    def __init__(
        self, run: TaskRun, decisions: Decisions, fan_out: ItemsUndo | None = None, children: Children | None = None
    ) -> None:
        self.run = run
        self.decisions = decisions
        # A fan-out's items are undone in batches of their own, each item under its own key.
        self.fan_out = fan_out
        # The Scheduler's own, which started its children (it holds their handles).
        self.children = children or Children(run, decisions)

    def order(self) -> list[str]:
        """The steps to undo, in the order they are undone."""
        return self.run.core.undo_order()

    async def all_attempted(self, *, audit: bool = True) -> None:
        """Undo every attempted step; the task ends Compensated."""
        run = self.run
        core, records = run.core, run.records
        request = core.compensation
        if request is not None and audit:
            undoing = ", ".join(self.order()) or "nothing"
            changed = f"task {core.status.state} -> Compensating; undoing {undoing}"
            past = core.past_pivot() if request.force else None
            if past is not None:
                # Only an operator's forced request gets here past the pivot (core/requests.py).
                await run.audit_request("compensate --force", None, request, f"{changed}; forced: {past}")
            else:
                await run.audit_request("compensate", None, request, changed)
        run.set_task(TaskState.COMPENSATING)
        records.advance()
        skipped: list[StepTransition] = []
        for step in core.never_started():
            if step.state != StepState.SKIPPED:
                run.set(step.name, StepState.SKIPPED)
            skipped.append(records.transition(step, task_state=TaskState.COMPENSATING, note=step.note))
        await records.mirror(skipped or [records.transition(core.status.steps[0], task_state=TaskState.COMPENSATING)])
        quiet: list[str] = []  # undone with no Agent to call: written with the last record
        for name in self.order():
            if not await self.step(name):
                quiet.append(name)
        run.set_task(TaskState.COMPENSATED)
        records.advance()
        last = core.status.steps[-1]
        final = [records.transition(core.step(n), note=core.step(n).note) for n in quiet if n != last.name]
        await records.mirror([*final, records.transition(last, task_state=TaskState.COMPENSATED, note=last.note)])

    async def step(self, name: str) -> bool:
        """Undo one attempted step; False if there was no Agent to call."""
        run = self.run
        core, records = run.core, run.records
        plan = run.plans[name]
        step = core.step(name)
        if self.fan_out is not None and self.fan_out.owns(name):
            await self.fan_out.undo(name)  # writes its own rows
            return True
        if plan.agent.startswith(CHILD_AGENT):
            return await self.children.undo(name)  # a child step: its child is undone
        if plan.compensation is None:
            if name in core.completed or not core.planned(name).wait:
                run.set(name, StepState.COMPENSATED)
            else:  # a wait step interrupted while it waited: it had no effect
                core.skip(name, step.note or "the task was undone while it waited")
                run.publish()
            return False
        runs = 0
        queue = plan.task_queue  # a held attempt starts again on its service's own (held_by_service)
        while True:
            records.advance()
            runs += 1
            run.set(name, StepState.COMPENSATING, TaskState.COMPENSATING)
            call = step_call(core.status, plan, records, run.call_payload, run.results, compensation=True)
            undo = start_agent(
                plan.compensation,
                call,
                task_queue=queue,
                policy=run.compensation_policy,
                summary=step_summary(
                    name, plan.compensation, run.payload, run=runs, failure_count=step.failure_count, undo=True
                ),
                compact=run.compact_calls,
            )
            try:
                foreign = foreign_claim(plan.compensation, call, await shielded(undo))
                if foreign is None:
                    run.set(name, StepState.COMPENSATED)
                    return True
                await run.refuse_result(name, StepState.COMPENSATION_FAILED, foreign)
            except ActivityError as err:
                held = await held_by_service(queue, plan.compensation, name, err, run.event)
                if held is not None:
                    queue = held.queue
                    continue
                await run.record_failure(name, StepState.COMPENSATION_FAILED, err)
            await self.decisions.wait_for(name, compensating=True)
