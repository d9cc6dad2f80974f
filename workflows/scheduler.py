"""The Scheduler: runs a task's declared steps through their Agents, in order, and
undoes the attempted ones in reverse when the task cannot complete.

Every change of a step's state happens in this class, in ``_set``; each is
mirrored to the state store - by the Agent itself when an attempt starts and
succeeds, and through the ``mirror.record`` local activity otherwise.

Each step's result (what its Agent got back, such as the provider's charge id) is kept
here: later steps receive the results of earlier ones, and a step's undo its own forward
result. Activities are called through their typed declarations (sas/task_models/activity_defs.py).

When a step fails after its Agent's quick retries, the Scheduler records it as
Failed and waits for a decision (``retry``, ``compensate`` or ``park``) from the
Supervisor or an operator; it never gives up on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, ClassVar

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from sas.task_models import (
        RESUBMIT_MEMO,
        AuditRecord,
        CallbackEvent,
        MirrorStamp,
        OperatorAnswer,
        OperatorRequest,
        Resubmission,
        StepCall,
        StepPlan,
        StepPolicyValues,
        StepResult,
        StepState,
        StepStatus,
        StepTransition,
        TaskAccepted,
        TaskPlan,
        TaskResult,
        TaskState,
        TaskStatus,
        TransitionBatch,
        validate_task_id,
    )
    from sas.task_models.activity_defs import AgentRef, CallbackDefs, MirrorDefs, activity_name, agent_result
    from sas.task_models.errors import MIRROR_WRITE_REFUSED
    from sas.task_models.results import shown
    from sas.task_models.search_attributes import CURRENT_STEP, FAILURE_COUNT, NEEDS_OPERATOR, TASK_STATE
    from sas.task_models.versions import next_stamp, version_of
    from sas.workflows.definitions import TaskDefinition
    from sas.workflows.inputs import INVALID_INPUT, decode, short
    from sas.workflows.summaries import current_details, step_summary

# A run started with the id of a task that already exists (a reused id): it undoes nothing and ends at once.
TASK_ID_REUSED = "TaskIdReused"
# Mirror writes wait out a database outage rather than fail the task.
_MIRROR_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
_MIRROR_TIMEOUT = timedelta(seconds=15)
_MAX_EVENTS = 200
# Requests from sas itself, not from a person: not written to the operator audit log.
_AUTOMATIC = ("supervisor", "temporal")
# A submitter's endpoint may be down for a while; keep trying for about half an hour.
_CALLBACK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=120), maximum_attempts=20
)


class TaskScheduler:
    """Base of every task workflow. Subclasses set ``definition`` and a ``@workflow.run``
    that calls :meth:`execute`."""

    definition: ClassVar[TaskDefinition]

    def __init__(self) -> None:
        info = workflow.info()
        # The task's status exists from the start (Pending, its declared steps), so no handler or
        # step has to ask whether it does; ``_plan`` is None until the task is accepted.
        self._status = TaskStatus(
            task_id=info.workflow_id,
            task_type=self.definition.task_type,
            state=TaskState.PENDING,
            steps=[StepStatus(name=d.name, position=i) for i, d in enumerate(self.definition.steps)],
        )
        self._plan: TaskPlan | None = None
        self._payload: dict[str, Any] = {}
        self._seq = 0  # this run's transitions, for the audit log
        self._stamp = 0  # orders the mirror writes, across runs too (task_models.versions)
        self._requests: list[tuple[str, OperatorRequest]] = []
        self._compensate: OperatorRequest | None = None
        self._inflight: workflow.ActivityHandle[StepResult] | None = None
        self._published: dict[str, Any] = {}
        self._callbacks: list[workflow.ActivityHandle[None]] = []
        # Forward results by step (secret fields included: they go only to the Agents).
        self._results: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ run

    async def execute(self, raw_input: RawValue | Any) -> TaskResult:
        task_input = self._validate(raw_input)
        info = workflow.info()
        resubmission = workflow.memo_value(RESUBMIT_MEMO, default=None, type_hint=Resubmission)
        declared = [
            StepPlan(
                name=d.name,
                position=i,
                agent=d.agent,
                compensation=d.compensation,
                idempotency_key=f"{info.workflow_id}:{d.name}",
                policy=d.policy,
            )
            for i, d in enumerate(self.definition.steps)
        ]
        self._plan = await workflow.execute_local_activity_method(
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
                resubmission=resubmission,
            ),
            start_to_close_timeout=_MIRROR_TIMEOUT,
            retry_policy=_MIRROR_RETRY,
            summary="accept the task: write its rows to the state store",
        )
        if self._plan.refused is not None:
            # The id belongs to another task: touch nothing of it (no rows, no keys, no callbacks).
            raise ApplicationError(self._plan.refused, type=TASK_ID_REUSED, non_retryable=True)
        self._status = TaskStatus(
            task_id=info.workflow_id,
            task_type=self.definition.task_type,
            state=TaskState.PENDING,
            steps=[StepStatus(name=p.name, position=p.position) for p in self._plan.steps],
        )
        self._payload = task_input
        self._notify("received")
        try:
            for plan in self._plan.steps:
                if self._compensate is not None:
                    break
                await self._run_forward(plan)
        except asyncio.CancelledError:
            # Cancelling the workflow (UI, CLI) means: undo what was done, then stop.
            self._event("workflow cancellation requested: compensating")
            self._compensate = self._compensate or OperatorRequest(by="temporal", reason="workflow cancelled")
        if self._compensate is None:
            self._notify("completed")
        else:
            await self._run_compensations()
            self._notify("compensated")
        await self._callbacks_delivered()
        return self._result()

    def _validate(self, raw_input: RawValue | Any) -> dict[str, Any]:
        """The task's input, or a non-retryable InvalidInput failure saying what is wrong with it.

        Decoded here, from the raw payload, rather than by the SDK before the workflow runs: a
        payload that does not decode (too deeply nested, not JSON) would otherwise fail every
        workflow task, leaving the workflow Running for ever with nothing to say why."""
        try:
            validate_task_id(workflow.info().workflow_id)
            if isinstance(raw_input, RawValue):
                raw_input = decode(raw_input)
            if not isinstance(raw_input, dict):
                raise ValueError(f"input must be a JSON object, got {type(raw_input).__name__}")
            model = self.definition.input_model.model_validate(raw_input)
        except ValidationError as err:
            raise ApplicationError(
                f"invalid {self.definition.task_type} input: {short(err)}", type=INVALID_INPUT, non_retryable=True
            ) from None
        except ValueError as err:
            raise ApplicationError(
                f"invalid {self.definition.task_type} input: {err}", type=INVALID_INPUT, non_retryable=True
            ) from None
        return model.model_dump(mode="json")

    # ----------------------------------------------------------- forward

    async def _run_forward(self, plan: StepPlan) -> None:
        step = self._step(plan.name)
        last = plan.position == len(self._steps_plan) - 1
        while self._compensate is None:
            self._advance()
            step.runs += 1
            self._set(step, StepState.PROCESSING, TaskState.PROCESSING)
            call = self._call(plan, compensation=False, task_state_on_done=TaskState.PROCESSED if last else None)
            self._inflight = workflow.start_activity_method(
                self._agent(plan.agent),
                call,
                start_to_close_timeout=plan.resolved_policy.complete_by,
                heartbeat_timeout=plan.resolved_policy.heartbeat,
                retry_policy=_retry_policy(plan.resolved_policy),
                cancellation_type=ActivityCancellationType.TRY_CANCEL,
                summary=step_summary(
                    plan.name, plan.agent, self._payload, run=step.runs, failure_count=step.failure_count
                ),
            )
            try:
                done = await self._inflight
                self._keep_result(plan, step, done)
                self._set(step, StepState.PROCESSED, TaskState.PROCESSED if last else TaskState.PROCESSING)
                self._notify("step_completed", step.name)
                return
            except ActivityError as err:
                if isinstance(err.cause, CancelledError):
                    if self._compensate is not None:
                        return  # undone below, with the others: the attempt may have had its effect
                    raise asyncio.CancelledError() from err  # the workflow itself is being cancelled
                await self._record_failure(step, StepState.FAILED, err)
            finally:
                self._inflight = None
            if await self._await_decision(step, compensating=False) == "compensate":
                return

    # ------------------------------------------------------ compensation

    async def _run_compensations(self) -> None:
        if self._compensate is not None and self._compensate.by not in _AUTOMATIC:
            attempted = [s.name for s in self._status.steps if s.runs > 0]
            await self._audit(
                "compensate",
                None,
                self._compensate,
                f"task {self._status.state} -> Compensating; undoing {', '.join(reversed(attempted)) or 'nothing'}",
            )
        self._set_task_state(TaskState.COMPENSATING)
        self._advance()
        skipped = []
        for step in self._status.steps:
            if step.runs == 0:
                self._set(step, StepState.SKIPPED)
                skipped.append(self._transition(step, task_state=TaskState.COMPENSATING))
        await self._mirror(skipped or [self._transition(self._status.steps[0], task_state=TaskState.COMPENSATING)])
        for plan in reversed(self._steps_plan):
            step = self._step(plan.name)
            if step.runs > 0:
                await self._undo(plan, step)
        self._set_task_state(TaskState.COMPENSATED)
        self._advance()
        await self._mirror([self._transition(self._status.steps[-1], task_state=TaskState.COMPENSATED)])

    async def _undo(self, plan: StepPlan, step: StepStatus) -> None:
        assert self._plan is not None
        if plan.compensation is None:
            self._set(step, StepState.COMPENSATED)
            return
        policy = self._plan.compensation_policy
        undo_runs = 0
        while True:
            self._advance()
            undo_runs += 1
            self._set(step, StepState.COMPENSATING, TaskState.COMPENSATING)
            undo = asyncio.ensure_future(
                workflow.execute_activity_method(
                    self._agent(plan.compensation),
                    self._call(plan, compensation=True),
                    start_to_close_timeout=policy.complete_by,
                    heartbeat_timeout=policy.heartbeat,
                    retry_policy=_retry_policy(policy),
                    summary=step_summary(
                        plan.name,
                        plan.compensation,
                        self._payload,
                        run=undo_runs,
                        failure_count=step.failure_count,
                        undo=True,
                    ),
                )
            )
            try:
                await _shielded(undo)
                self._set(step, StepState.COMPENSATED)
                return
            except ActivityError as err:
                await self._record_failure(step, StepState.COMPENSATION_FAILED, err)
            await self._await_decision(step, compensating=True)

    # --------------------------------------------------------- decisions

    async def _record_failure(self, step: StepStatus, state: StepState, err: ActivityError) -> None:
        message, error_type, permanent = _describe(err)
        step.last_error, step.error_type, step.permanent = message, error_type, permanent
        self._advance()
        task_state = TaskState.FAILED if state == StepState.FAILED else TaskState.COMPENSATING
        self._set(step, state, task_state)
        self._event(f"{step.name}: {state} ({error_type}): {message}")
        self._notify("failed", step.name, f"{error_type}: {message}")
        # CompleteBy of a Failed step: when the Supervisor should look at it - now.
        await self._mirror([self._transition(step, task_state=task_state, complete_by=workflow.now())])
        await self._wake_supervisor()

    async def _await_decision(self, step: StepStatus, *, compensating: bool) -> str:
        """Wait for the Supervisor or an operator. Returns "retry" or "compensate"."""
        while True:
            await workflow.wait_condition(
                lambda: bool(self._requests) or (self._compensate is not None and not compensating)
            )
            if not self._requests:
                return "compensate"
            kind, request = self._requests.pop(0)
            if request.failure_count is not None:
                step.failure_count = max(step.failure_count, request.failure_count)
                self._publish()
            if kind == "park":
                self._advance()
                self._status.needs_operator = True  # published by _set below
                self._set(step, StepState.ERROR, TaskState.ERROR)
                self._event(f"{step.name}: parked as Error by {request.by}: {request.reason}")
                self._notify("needs_operator", step.name, request.reason)
                await self._mirror([self._transition(step, task_state=TaskState.ERROR, complete_by=None)])
                continue
            self._status.needs_operator = False
            self._publish()
            self._event(f"{step.name}: {kind} by {request.by}" + (f": {request.reason}" if request.reason else ""))
            if request.reset_failure_count:
                changed = f"FailureCount {step.failure_count} -> 0; {step.name} retried"
                step.failure_count = 0
                self._advance()
                reset = self._transition(step).model_copy(update={"reset_failure_count": True})
                await self._mirror([reset])
                self._publish()
                await self._audit("resubmit", step.name, request, changed)
            elif request.by not in _AUTOMATIC:
                await self._audit(kind, step.name, request, f"{step.name} ({step.state}) {kind}")
            if kind == "compensate" and not compensating:
                return "compensate"
            return "retry"

    # ------------------------------------------------- signals and updates
    #
    # The signals keep the Temporal UI and `temporal workflow signal` working; a signal
    # that does not apply changes nothing and is recorded in `events`. The updates do
    # the same, but reject what does not apply in their validator, so the caller gets
    # an immediate answer saying why.

    @workflow.signal(name="retry")
    def retry(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Re-run the step that waits for a decision (or retry its failed undo)."""
        request = self._request("retry", raw)
        if request is None:
            return
        problem = self._retry_problem(request)
        if problem:
            # Still count it: the Supervisor may be counting an overrun of a running step.
            self._note_count(request)
            self._event(f"retry from {request.by} ignored: {problem}")
            return
        self._claim_count(request)
        self._requests.append(("retry", request))

    @workflow.signal(name="compensate")
    def compensate(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Undo every attempted step, in reverse order."""
        request = self._request("compensate", raw)
        if request is None:
            return
        problem = self._compensate_problem(request)
        self._note_count(request)
        if problem:
            self._event(f"compensate from {request.by} ignored: {problem}")
            return
        self._start_compensation(request)

    @workflow.signal(name="park")
    def park(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Park the waiting step as Error until an operator acts (sent by the Supervisor)."""
        request = self._request("park", raw)
        if request is None:
            return
        waiting = self._waiting_step()
        if waiting is None:
            self._event(f"park from {request.by} ignored: no step is waiting for a decision")
            return
        if request.failure_count is not None and request.failure_count <= waiting.failure_count:
            self._event(
                f"park from {request.by} ignored: the decision at FailureCount {request.failure_count} was already applied"
            )
            return
        self._claim_count(request)
        self._requests.append(("park", request))

    @workflow.update(name="request_retry")
    def request_retry(self, request: OperatorRequest) -> OperatorAnswer:
        """``retry`` with an answer: accepted, or rejected with the reason."""
        step = self._waiting_step()
        self._claim_count(request)
        self._requests.append(("retry", request))
        assert step is not None
        what = "undo of" if step.state != StepState.FAILED and self._compensate is not None else "step"
        return OperatorAnswer(message=f"retrying {what} {step.name}", task_state=self._status.state)

    @request_retry.validator
    def _validate_retry(self, request: OperatorRequest) -> None:
        problem = self._retry_problem(request)
        if problem:
            raise ValueError(problem)

    @workflow.update(name="request_compensate")
    def request_compensate(self, request: OperatorRequest) -> OperatorAnswer:
        """``compensate`` with an answer: accepted, or rejected with the reason."""
        self._note_count(request)
        self._start_compensation(request)
        return OperatorAnswer(
            message="compensating: attempted steps are undone in reverse order", task_state=self._status.state
        )

    @request_compensate.validator
    def _validate_compensate(self, request: OperatorRequest) -> None:
        problem = self._compensate_problem(request)
        if problem:
            raise ValueError(problem)

    def _request(self, signal: str, raw: RawValue | None) -> OperatorRequest | None:
        """A signal's request, or None (and an event saying why) if its payload is not one.

        The signals take the raw payload and decode it here: a payload the SDK failed to
        decode would be dropped with only a line in the worker's log."""
        if raw is None:
            return OperatorRequest()
        try:
            decoded = decode(raw)
            return OperatorRequest() if decoded is None else OperatorRequest.model_validate(decoded)
        except ValidationError as err:
            problem = short(err)
        except ValueError as err:
            problem = str(err)
        workflow.logger.warning("%s signal rejected: %s", signal, problem)
        self._event(f"{signal} signal rejected: invalid request: {problem}")
        return None

    def _retry_problem(self, request: OperatorRequest) -> str | None:
        """Why a retry request does not apply now, or None if it does."""
        if self._plan is None:
            return "the task has not been accepted yet"
        if self._status.state.terminal:
            return f"the task is already {self._status.state}"
        names = [s.name for s in self._status.steps]
        if request.step is not None and request.step not in names:
            return f"unknown step {request.step!r}; the steps are {', '.join(names)}"
        waiting = self._waiting_step()
        if waiting is None:
            if request.step is not None:
                return f"step {request.step} is {self._step(request.step).state}, not waiting for a decision"
            return f"no step is waiting for a decision (the task is {self._status.state})"
        if request.step is not None and request.step != waiting.name:
            return f"step {request.step} is {self._step(request.step).state}; the step waiting for a decision is {waiting.name}"
        if request.failure_count is not None and request.failure_count <= waiting.failure_count:
            return f"the decision at FailureCount {request.failure_count} was already applied"
        return None

    def _claim_count(self, request: OperatorRequest) -> None:
        """Take a decision's FailureCount as soon as it is queued, so a second copy of the same
        decision (two Supervisors flushing one outbox row) is recognised and ignored."""
        waiting = self._waiting_step()
        if waiting is not None and request.failure_count is not None:
            waiting.failure_count = max(waiting.failure_count, request.failure_count)

    def _compensate_problem(self, request: OperatorRequest) -> str | None:
        if self._plan is None:
            return None if self._compensate is None else "the task is already compensating"
        if self._status.state.terminal:
            return f"the task is already {self._status.state}"
        names = [s.name for s in self._status.steps]
        if request.step is not None and request.step not in names:
            return f"unknown step {request.step!r}; the steps are {', '.join(names)}"
        if self._compensate is not None:
            waiting = self._waiting_step()
            if waiting is None or waiting.state == StepState.FAILED:
                return "the task is compensating"
        return None

    def _start_compensation(self, request: OperatorRequest) -> None:
        self._event(f"compensate requested by {request.by}" + (f": {request.reason}" if request.reason else ""))
        if self._compensate is None:
            self._compensate = request
            if self._inflight is not None:
                self._inflight.cancel()
            self._requests.clear()
        else:
            self._requests.append(("compensate", request))  # retry the undo that failed or was parked

    @workflow.query(name="status")
    def status(self) -> TaskStatus:
        return self._status

    # ------------------------------------------------------------ helpers

    def _agent(self, name: str) -> AgentRef:
        """The typed reference of the Agent a plan names. The plan (recorded in history when the
        task was accepted) decides which Agent runs; the registered name stays what it was."""
        ref = self.definition.agents().get(name)
        if ref is None:
            raise ApplicationError(f"no Agent {name!r} is declared for {self.definition.task_type} tasks")
        return ref

    def _keep_result(self, plan: StepPlan, step: StepStatus, done: StepResult) -> None:
        """Keep a forward result for the later steps and the undo; show it without its secrets."""
        # No workflow.patched here: keeping a result changes no command, only the inputs of later
        # activities, which replay does not compare. A run started before results existed got
        # answers without the provider's ids; its undo then looks the id up by our key
        # (activities/agent.py). A patch would cost every task a marker and a visibility write.
        self._results[plan.name] = done.data
        model = agent_result(plan.agent)
        step.result = shown(model, done.data) if model is not None else done.data

    def _shown_results(self) -> dict[str, dict[str, Any]]:
        return {s.name: s.result for s in self._status.steps if s.result is not None}

    @property
    def _steps_plan(self) -> list[StepPlan]:
        assert self._plan is not None
        return self._plan.steps

    def _step(self, name: str) -> StepStatus:
        return next(s for s in self._status.steps if s.name == name)

    def _waiting_step(self) -> StepStatus | None:
        waiting = (StepState.FAILED, StepState.COMPENSATION_FAILED, StepState.ERROR)
        return next((s for s in self._status.steps if s.state in waiting), None)

    def _note_count(self, request: OperatorRequest) -> None:
        if request.failure_count is None:
            return
        target = request.step and next((s for s in self._status.steps if s.name == request.step), None)
        if target:
            target.failure_count = max(target.failure_count, request.failure_count)

    def _advance(self) -> None:
        """Number the next transition: its audit seq and its mirror stamp."""
        self._seq += 1
        self._stamp = next_stamp(self._stamp, workflow.now())

    def _set(self, step: StepStatus, state: StepState, task_state: TaskState | None = None) -> None:
        """The one place a step's state changes in the Scheduler."""
        step.state = state
        if task_state is not None:
            self._status.state = task_state
            self._status.current_step = step.name
        self._publish()

    def _set_task_state(self, task_state: TaskState) -> None:
        self._status.state = task_state
        self._publish()

    def _publish(self) -> None:
        """Keep the UI's view in step with the task: the current details (the workflow page) and
        the search attributes an operator filters on (only what changed, to keep the history small)."""
        if self._plan is None:
            return
        # Current details are no command and no event: the UI reads them through a query, so
        # setting them on every change costs nothing in history and replays the same.
        workflow.set_current_details(current_details(self._status))
        if not self._plan.search_attributes:
            return
        wanted: dict[SearchAttributeKey[Any], Any] = {
            TASK_STATE: str(self._status.state),
            CURRENT_STEP: self._status.current_step or "",
            FAILURE_COUNT: max((s.failure_count for s in self._status.steps), default=0),
            NEEDS_OPERATOR: self._status.needs_operator,
        }
        # The current step alone moving on is not worth an upsert (each one is a history event
        # and a visibility write): it is published with the next change of anything else.
        triggers = (TASK_STATE, FAILURE_COUNT, NEEDS_OPERATOR)
        if any(self._published.get(key.name) != wanted[key] for key in triggers):
            changed = [key.value_set(value) for key, value in wanted.items() if self._published.get(key.name) != value]
            workflow.upsert_search_attributes(changed)
            self._published.update({key.name: value for key, value in wanted.items()})

    def _call(self, plan: StepPlan, *, compensation: bool, task_state_on_done: TaskState | None = None) -> StepCall:
        step = self._step(plan.name)
        return StepCall(
            task_id=self._status.task_id,
            task_type=self._status.task_type,
            step=plan.name,
            position=plan.position,
            idempotency_key=f"{plan.idempotency_key}:undo" if compensation else plan.idempotency_key,
            target_key=plan.idempotency_key if compensation else None,
            compensation=compensation,
            payload=self._payload,
            stamp=MirrorStamp(
                seq=self._stamp,
                chain_id=workflow.info().first_execution_run_id,
                failure_count=step.failure_count,
                task_state_on_done=task_state_on_done,
            ),
            # The steps before this one, in order; an undo gets its own step's result.
            results={}
            if compensation
            else {
                p.name: self._results[p.name]
                for p in self._steps_plan
                if p.position < plan.position and p.name in self._results
            },
            forward_result=self._results.get(plan.name) if compensation else None,
        )

    def _transition(
        self, step: StepStatus, *, task_state: TaskState | None = None, complete_by: Any = None
    ) -> StepTransition:
        return StepTransition(
            task_id=workflow.info().workflow_id,
            step=step.name,
            version=version_of(self._stamp),
            state=step.state,
            at=workflow.now(),
            complete_by=complete_by,
            failure_count=step.failure_count,
            last_error=step.last_error,
            error_type=step.error_type,
            permanent=step.permanent,
            task_state=task_state,
            run_id=workflow.info().run_id,
            chain_id=workflow.info().first_execution_run_id,
        )

    async def _mirror(self, transitions: list[StepTransition]) -> None:
        with _unless_refused(activity_name(MirrorDefs.record)):
            await workflow.execute_local_activity_method(
                MirrorDefs.record,
                TransitionBatch(transitions=transitions),
                start_to_close_timeout=_MIRROR_TIMEOUT,
                retry_policy=_MIRROR_RETRY,
                summary="record "
                + ", ".join(
                    f"{t.step} {t.state}" + (f" (task {t.task_state})" if t.task_state else "") for t in transitions
                ),
            )

    async def _audit(self, action: str, step: str | None, request: OperatorRequest, changed: str) -> None:
        """Record an operator's action - who, when, why, what it changed - in the state store."""
        self._advance()
        record = AuditRecord(
            task_id=self._status.task_id,
            run_id=workflow.info().run_id,
            seq=self._seq,
            step=step,
            action=action,
            actor=request.by,
            reason=request.reason,
            changed=changed,
            at=workflow.now(),
        )
        with _unless_refused(activity_name(MirrorDefs.audit)):
            await workflow.execute_local_activity_method(
                MirrorDefs.audit,
                record,
                start_to_close_timeout=_MIRROR_TIMEOUT,
                retry_policy=_MIRROR_RETRY,
                summary=f"audit: {action} by {request.by}",
            )

    async def _wake_supervisor(self) -> None:
        """Tell the Supervisor now rather than at its next tick; harmless if it is not running."""
        if self._plan is None or not self._plan.supervisor_workflow_id:
            return
        try:
            await workflow.get_external_workflow_handle(self._plan.supervisor_workflow_id).signal("wake")
        except Exception as err:  # noqa: BLE001 - waking is an optimisation only
            workflow.logger.debug("could not wake the Supervisor: %s", err)

    def _notify(self, kind: str, step: str | None = None, detail: str | None = None) -> None:
        """Post a status event to the submitter's callback URL, if the task has one.
        Not awaited: a slow receiver must not hold the task up."""
        url = self._payload.get("callback_url")
        if not url:
            return
        event = CallbackEvent(
            event_id=f"{self._status.task_id}:{self._stamp}:{kind}" + (f":{step}" if step else ""),
            kind=kind,
            task_id=self._status.task_id,
            task_type=self._status.task_type,
            state=self._status.state,
            step=step,
            detail=detail,
            at=workflow.now(),
            url=url,
            results=self._shown_results(),
        )
        self._callbacks.append(
            workflow.start_activity_method(
                CallbackDefs.post,
                event,
                start_to_close_timeout=timedelta(seconds=15),
                retry_policy=_CALLBACK_RETRY,
                summary=f"post '{kind}' to the submitter's callback URL",  # the URL itself is not shown
            )
        )

    async def _callbacks_delivered(self) -> None:
        """Wait for the posts still under way; one that gave up does not fail the task."""
        for handle in self._callbacks:
            try:
                await handle
            except ActivityError as err:
                self._event(f"callback not delivered: {err.cause or err}")

    def _event(self, text: str) -> None:
        self._status.events.append(f"{workflow.now().isoformat(timespec='seconds')} {text}")
        del self._status.events[:-_MAX_EVENTS]

    def _result(self) -> TaskResult:
        return TaskResult(task_id=self._status.task_id, state=self._status.state, steps=self._status.steps)


async def _shielded(task: asyncio.Future[Any]) -> Any:
    """Await ``task`` through any number of cancellations: once undoing has begun,
    cancelling the workflow must not leave it half done."""
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            workflow.logger.warning("cancellation ignored while compensating")


def _retry_policy(policy: StepPolicyValues) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=policy.initial_interval_s),
        backoff_coefficient=policy.backoff,
        maximum_interval=timedelta(seconds=policy.max_interval_s),
        maximum_attempts=policy.max_attempts,
    )


def _describe(err: ActivityError) -> tuple[str, str, bool]:
    """Message, type and permanence of an Agent's failure, for the record and the Supervisor."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return cause.message, cause.type or "ApplicationError", cause.non_retryable
    if isinstance(cause, TimeoutError):
        kind = cause.type.name if cause.type is not None else "UNKNOWN"
        return f"no answer within the step's {kind.lower().replace('_', '-')} timeout", f"Timeout:{kind}", False
    if isinstance(cause, CancelledError):
        return "the attempt was cancelled", "Cancelled", False
    return str(cause or err), type(cause or err).__name__, False


@contextmanager
def _unless_refused(activity_name: str) -> Iterator[None]:
    """A mirror write the state store refused for good (the activity raised the alert) does not
    stop the task: Temporal holds its state, and the row is repaired from it later."""
    try:
        yield
    except (ActivityError, ApplicationError) as err:
        # A local activity's failure reaches the workflow as the activity's own error, not
        # wrapped in an ActivityError as a regular activity's is; both are handled.
        cause = err.cause if isinstance(err, ActivityError) else err
        if not (isinstance(cause, ApplicationError) and cause.type == MIRROR_WRITE_REFUSED):
            raise
        workflow.logger.error("%s refused for good, the task goes on: %s", activity_name, cause.message)
