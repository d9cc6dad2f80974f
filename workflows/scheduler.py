"""The Scheduler: runs a task's declared stages through their Agents - a step, or a parallel
group whose steps start together - then undoes the attempted steps in the reverse order of
their completion when the task cannot complete.

The rules live in the pure core (``workflows/core/``): every change of a step's state is made
in ``TaskCore.set``, and whether an operator's request applies is decided in
``workflows/core/requests.py``. This module carries them out with Temporal: the Agents'
activities (``shell/agents.py``), mirror writes (``shell/records.py``), wait steps
(``shell/waits.py``), the undo engine (``shell/undo.py``, shared with the clean-up) and the
operator protocol (``shell/host.py``).

When a step fails after its Agent's quick retries, the Scheduler records it as Failed and
waits for a decision (``retry``, ``compensate`` or ``park``) from the Supervisor or an
operator; it never gives up on its own.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        RESUBMIT_MEMO,
        OperatorRequest,
        PivotRole,
        Resubmission,
        StepPlan,
        StepResult,
        StepState,
        StepStatus,
        StepTransition,
        TaskAccepted,
        TaskPlan,
        TaskResult,
        TaskState,
        TaskStatus,
        validate_task_id,
    )
    from sas.task_models.activity_defs import MirrorDefs, agent_result
    from sas.task_models.results import shown
    from sas.workflows.core.machine import DECISION_STATES, PlanStep, TaskCore
    from sas.workflows.definitions import ForEach, StepContext, StepDefinition, TaskDefinition, Wait
    from sas.workflows.inputs import INVALID_INPUT, decode, short
    from sas.workflows.shell.agents import (
        cancelled,
        held_by_breaker,
        start_agent,
        step_call,
        until_ended,
    )
    from sas.workflows.shell.fanout import FanOutSteps
    from sas.workflows.shell.records import _MIRROR_RETRY, _MIRROR_TIMEOUT, Records
    from sas.workflows.shell.undo import UndoEngine
    from sas.workflows.shell.waits import WaitSteps
    from sas.workflows.summaries import step_summary

# A run started with the id of a task that already exists (a reused id): it undoes nothing and ends at once.
TASK_ID_REUSED = "TaskIdReused"


class TaskScheduler(UndoEngine, WaitSteps, FanOutSteps):
    """Base of every task workflow. Subclasses set ``definition`` and a ``@workflow.run``
    that calls :meth:`execute`."""

    definition: ClassVar[TaskDefinition]

    def __init__(self) -> None:
        super().__init__()
        info = workflow.info()
        # The task's status exists from the start (Pending, its declared steps), so no handler or
        # step has to ask whether it does; the core is accepted once the state store has the task.
        self._core = self._new_core(info.workflow_id, [(s.name, None, None) for s in self.definition.steps])
        self._records = Records(task_id=info.workflow_id, chain_id=info.first_execution_run_id)
        self._listen_for_approvals([s for s in self.definition.steps if isinstance(s, Wait)])
        self._waits = False  # whether a cancelled forward attempt is waited for (set as the run starts)

    def _new_core(self, task_id: str, steps: list[tuple[str, int | None, PivotRole | None]]) -> TaskCore:
        """The core over ``steps``: (name, stage, pivot role), as the accepted plan recorded them
        (a plan accepted before pivots existed records none, so it replays as it ran)."""
        definition = self.definition
        plan = []
        for position, (name, _, pivot) in enumerate(steps):
            step = definition.step(name)
            stage = definition.stage_of(name)
            is_wait = isinstance(step, Wait)
            plan.append(
                PlanStep(
                    name,
                    position,
                    position if stage is None else stage,
                    undo=isinstance(step, StepDefinition) and step.undo is not None,
                    wait=is_wait,
                    signal=step.signal if isinstance(step, Wait) else None,
                    pivot=pivot,
                )
            )
        status = TaskStatus(
            task_id=task_id,
            task_type=definition.task_type,
            state=TaskState.PENDING,
            steps=[
                StepStatus(name=p.name, position=p.position, stage=s) for p, (_, s, _) in zip(plan, steps, strict=True)
            ],
        )
        return TaskCore(status, plan)

    # ------------------------------------------------------------------ run

    async def execute(self, raw_input: RawValue | Any) -> TaskResult:
        task_input = self._validate(raw_input)
        plan = await self._accept(task_input)
        self._payload = task_input
        self._notify("received")
        while True:
            try:
                await self._run_stages()
                break
            except asyncio.CancelledError:
                past = None if self._core.compensating else self._core.past_pivot()
                if past is not None:
                    # Past the pivot a cancellation is a compensate like any other, and refused
                    # the same way: the task goes on from where it was (a plan without a pivot
                    # never gets here, so its histories replay as they ran).
                    self._event(f"workflow cancellation refused: past the point of no return: {past}; going on")
                    continue
                # Cancelling the workflow (UI, CLI) means: undo what was done, then stop.
                self._event("workflow cancellation requested: compensating")
                if not self._core.compensating:
                    self._core.begin_compensation(OperatorRequest(by="temporal", reason="workflow cancelled"))
                break
        if not self._core.compensating:
            await self._finish(plan)
            self._notify("completed")
        else:
            await self._run_compensations()
            self._notify("compensated")
        for line in await self._notifier.delivered():
            self._event(line)
        status = self._core.status
        return TaskResult(task_id=status.task_id, state=status.state, steps=status.steps)

    async def _accept(self, task_input: dict[str, Any]) -> TaskPlan:
        info = workflow.info()
        declared = []
        for position, step in enumerate(self.definition.steps):
            declared.append(
                StepPlan(
                    name=step.name,
                    position=position,
                    agent=step.agent,
                    compensation=step.compensation,
                    idempotency_key=f"{info.workflow_id}:{step.name}",
                    policy=step.policy if isinstance(step, StepDefinition) else None,
                    stage=self.definition.stage_of(step.name),
                    pivot=self.definition.pivot_role(step.name),
                )
            )
        plan = await workflow.execute_local_activity_method(
            MirrorDefs.accept,
            TaskAccepted(
                task_id=info.workflow_id,
                task_type=self.definition.task_type,
                workflow_type=info.workflow_type,
                task_queue=info.task_queue,
                payload=task_input,
                steps=declared,
                accepted_at=workflow.now(),
                run_id=info.run_id,
                chain_id=info.first_execution_run_id,
                resubmission=workflow.memo_value(RESUBMIT_MEMO, default=None, type_hint=Resubmission),
            ),
            start_to_close_timeout=_MIRROR_TIMEOUT,
            retry_policy=_MIRROR_RETRY,
            summary="accept the task: write its rows to the state store",
        )
        if plan.refused is not None:
            # The id belongs to another task: touch nothing of it (no rows, no keys, no callbacks).
            raise ApplicationError(plan.refused, type=TASK_ID_REUSED, non_retryable=True)
        before = self._core
        self._core = self._new_core(info.workflow_id, [(p.name, p.stage, p.pivot) for p in plan.steps])
        self._core.accepted = True
        self._core.compensation = before.compensation  # a compensate that came before the accept
        self._core.status.events = before.status.events
        self._plans = {p.name: p for p in plan.steps}
        self._compensation_policy = plan.compensation_policy
        self._supervisor_id = plan.supervisor_workflow_id
        self._publisher.search_attributes = plan.search_attributes
        self._publisher.progress = plan.publish_progress
        # Recorded with the plan, not a patch marker (one more event on every task's happy path):
        # a plan accepted before it was waited for says False, and replays cancelling at once.
        self._waits = plan.waits_for_cancelled_attempts
        self._publisher.on = True
        url = task_input.get("callback_url")
        self._notifier.url = url if isinstance(url, str) else None
        self._notifier.incarnation = plan.incarnation
        return plan

    def _validate(self, raw_input: RawValue | Any) -> dict[str, Any]:
        """The task's input, or a non-retryable InvalidInput failure saying what is wrong with it.

        Decoded here, from the raw payload, rather than by the SDK before the workflow runs: a
        payload that does not decode (too deeply nested, not JSON) would otherwise fail every
        workflow task, leaving the workflow Running for ever with nothing to say why."""
        task_type = self.definition.task_type
        try:
            validate_task_id(workflow.info().workflow_id)
            if isinstance(raw_input, RawValue):
                raw_input = decode(raw_input)
            if not isinstance(raw_input, dict):
                raise ValueError(f"input must be a JSON object, got {type(raw_input).__name__}")
            model = self.definition.input_model.model_validate(raw_input)
        except ValidationError as err:
            raise ApplicationError(
                f"invalid {task_type} input: {short(err)}", type=INVALID_INPUT, non_retryable=True
            ) from None
        except ValueError as err:
            raise ApplicationError(
                f"invalid {task_type} input: {err}", type=INVALID_INPUT, non_retryable=True
            ) from None
        return model.model_dump(mode="json")

    # ----------------------------------------------------------- forward

    async def _run_stages(self) -> None:
        core = self._core
        earlier: list[str] = []
        for stage in core.stages():
            if core.compensating:
                return
            # Run again after a refused cancellation (past the pivot), the stages done stay done.
            left = [n for n in stage if core.step(n).state not in (StepState.PROCESSED, StepState.SKIPPED)]
            runnable = await self._skip_unless_wanted(left) if left else []
            if len(runnable) == 1:
                await self._run_step(runnable[0], earlier)
            elif runnable:
                await asyncio.gather(*(self._run_step(name, earlier) for name in runnable))
            earlier = earlier + stage

    async def _skip_unless_wanted(self, stage: list[str]) -> list[str]:
        """The stage's steps whose condition holds; the others are Skipped, with the reason."""
        context = StepContext(input=self._payload, results=self._results)
        runnable: list[str] = []
        skipped: list[StepTransition] = []
        for name in stage:
            when = self.definition.step(name).when
            if when is None or when.predicate(context):
                runnable.append(name)
                continue
            if not skipped:
                self._records.advance()
            step = self._core.skip(name, f"skipped: {when.unless}")
            self._publish()
            self._event(f"{name}: {step.note}")
            skipped.append(self._records.transition(step, note=step.note))
        if skipped:
            await self._records.mirror(skipped)
        return runnable

    async def _run_step(self, name: str, earlier: list[str]) -> None:
        step = self.definition.step(name)
        if isinstance(step, Wait):
            await self._run_wait(name, step)
        elif isinstance(step, ForEach):
            await self._run_fan_out(name, step)
        else:
            await self._run_forward(name, earlier)

    async def _undo(self, name: str) -> bool:
        if isinstance(self.definition.step(name), ForEach):
            await self._undo_fan_out(name)  # its items, in batches (workflows/shell/fanout.py)
            return True
        return await super()._undo(name)

    async def _run_forward(self, name: str, earlier: list[str]) -> None:
        core, records = self._core, self._records
        plan = self._plans[name]
        # The Agent of the only step of the last stage records the task's completion with its own.
        completes = core.stages()[-1] == [name]
        # Resumed after a refused cancellation while the step waited for a decision: it still does.
        resumed = core.step(name).state in DECISION_STATES
        if resumed and await self._await_decision(name, compensating=False) == "compensate":
            return
        while not core.compensating:
            records.advance()
            step = core.start(name)
            self._publish()
            call = step_call(
                core.status,
                plan,
                records,
                self._payload,
                self._results,
                compensation=False,
                task_state_on_done=TaskState.PROCESSED if completes else None,
                earlier=earlier,
            )
            waits = self._waits
            handle = start_agent(
                plan.agent,
                call,
                task_queue=plan.task_queue,
                policy=plan.resolved_policy,
                summary=step_summary(name, plan.agent, self._payload, run=step.runs, failure_count=step.failure_count),
                wait_when_cancelled=waits,
            )
            self._inflight[name] = handle
            try:
                done = await (until_ended(handle) if waits else handle)
                self._keep_result(plan, step, done)
                core.done(name)
                self._publish()
                self._notify("step_completed", name)
                return
            except ActivityError as err:
                # Once undoing has begun, however the attempt ended (cancelled, or its complete-by
                # passed while its request was answered) it is undone with the others, not failed.
                if cancelled(err) or (waits and core.compensating):
                    if core.compensating:
                        return  # undone below, with the others: the attempt may have had its effect
                    raise asyncio.CancelledError() from err  # the workflow itself is being cancelled
                if await held_by_breaker(plan, name, err, self._event):
                    continue  # not a failure: started again, to wait in the service's queue
                await self._record_failure(name, StepState.FAILED, err)
            finally:
                self._inflight.pop(name, None)
            if await self._await_decision(name, compensating=False) == "compensate":
                return

    async def _finish(self, plan: TaskPlan) -> None:
        """The task completed. Its completion is in the mirror already when the Agent of a last
        stage's only step wrote it; otherwise (a parallel group, a wait or a skipped step last)
        it is written here."""
        core = self._core
        last = core.stages()[-1]
        if len(last) == 1 and not core.planned(last[0]).wait and core.step(last[0]).state == StepState.PROCESSED:
            return
        self._set_task(TaskState.PROCESSED)
        self._records.advance()
        carrier = core.step(core.completed[-1]) if core.completed else core.status.steps[-1]
        await self._records.mirror(
            [self._records.transition(carrier, task_state=TaskState.PROCESSED, note=carrier.note)]
        )

    def _keep_result(self, plan: StepPlan, step: StepStatus, done: StepResult) -> None:
        """Keep a forward result for the later steps and the undo; show it without its secrets."""
        # No workflow.patched here: keeping a result changes no command, only the inputs of later
        # activities, which replay does not compare.
        self._results[plan.name] = done.data
        model = agent_result(plan.agent)
        step.result = shown(model, done.data) if model is not None else done.data
