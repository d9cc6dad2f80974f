"""CleanupWorkflow: undo a task whose Scheduler workflow was closed from outside
(terminated, failed, timed out, cancelled) - using only what the mirror recorded.

The Supervisor starts it (id ``cleanup-<task id>``, on the task queue the mirror
recorded) when it finds a task the mirror says is open but whose workflow is dead
(detection d). It calls the same compensation Agents as the Scheduler, with the
same idempotency keys (``<forward key>:undo``), so an undo the dead workflow had
already begun is not done twice. Steps that may have had an effect are undone in
reverse order; steps never started are Skipped. Its mirror writes carry versions
above anything the dead workflow could still write (``CLEANUP_SEQ``).

An undo that fails after its quick retries is recorded as CompensationFailed and
waits, like the Scheduler, for ``retry`` (the Supervisor's ladder or an operator)
or ``park``.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        MirrorStamp,
        OperatorRequest,
        StepCall,
        StepResult,
        StepState,
        StepTransition,
        TaskState,
        TransitionBatch,
    )
    from sas.task_models.cleanup import CLEANUP_SEQ, CleanupInput, CleanupStep
    from sas.task_models.versions import version_of
    from sas.workflows.inputs import decode_model

# The states in which a step may have had its effect: undo it (undoing is safe when nothing was done).
UNDO_STATES = ("Processed", "Processing", "Failed", "Compensating", "CompensationFailed", "Error")
_MIRROR_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30))
_MIRROR_TIMEOUT = timedelta(seconds=15)


class _MirrorWrites:
    """The mirror write this workflow makes, declared so that it is called by reference with its
    types. ``activities/mirror.py`` implements it (``MirrorActivities.record``), but loads the
    database stack that a workflow module must not (tests/scale/test_sandbox_imports.py). The
    name is recorded in every clean-up history: renaming it breaks replay."""

    @activity.defn(name="mirror.record")
    async def record(self, batch: TransitionBatch) -> int:
        raise NotImplementedError("a declaration for the workflow; the worker runs MirrorActivities.record")


@workflow.defn(name="CleanupWorkflow")
class CleanupWorkflow:
    def __init__(self) -> None:
        self._seq = CLEANUP_SEQ
        self._failure_counts: dict[str, int] = {}
        self._requests: list[tuple[str, OperatorRequest]] = []
        self._waiting: str | None = None
        self._states: dict[str, str] = {}

    @workflow.run
    async def run(self, raw: RawValue) -> dict[str, str]:
        cleanup = decode_model(raw, CleanupInput, "clean-up")
        self._input = cleanup
        self._states = {s.name: s.state for s in cleanup.steps}
        ordered = sorted(cleanup.steps, key=lambda s: s.position)
        self._seq += 1
        never_started = [s for s in ordered if s.state == StepState.PENDING]
        for step in never_started:
            self._states[step.name] = StepState.SKIPPED
        await self._mirror(
            [self._transition(s.name, StepState.SKIPPED) for s in never_started]
            or [self._transition(ordered[-1].name, self._states[ordered[-1].name])],
            TaskState.COMPENSATING,
        )
        for step in reversed(ordered):
            if step.state in UNDO_STATES:
                await self._undo(step)
        self._seq += 1
        await self._mirror([self._transition(ordered[-1].name, self._states[ordered[-1].name])], TaskState.COMPENSATED)
        return self._states

    async def _undo(self, step: CleanupStep) -> None:
        if step.compensation is None:
            self._seq += 1
            self._states[step.name] = StepState.COMPENSATED
            await self._mirror([self._transition(step.name, StepState.COMPENSATED)], TaskState.COMPENSATING)
            return
        policy = self._input.compensation_policy
        while True:
            self._seq += 1
            call = StepCall(
                task_id=self._input.task_id,
                task_type=self._input.task_type,
                step=step.name,
                position=step.position,
                idempotency_key=f"{step.idempotency_key}:undo",
                target_key=step.idempotency_key,
                compensation=True,
                payload=self._input.payload,
                stamp=MirrorStamp(
                    seq=self._seq,
                    chain_id=self._input.chain_id,
                    failure_count=self._failure_counts.get(step.name, 0),
                ),
            )
            try:
                # By name: the undo is whichever Agent the mirror recorded for the step when the
                # task ran, data this workflow is given, not a reference its code holds.
                await workflow.execute_activity(
                    step.compensation,
                    call,
                    result_type=StepResult,
                    summary=f"undo {step.name} with {step.compensation} (clean-up of {self._input.task_id})",
                    start_to_close_timeout=policy.complete_by,
                    heartbeat_timeout=policy.heartbeat,
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=policy.initial_interval_s),
                        backoff_coefficient=policy.backoff,
                        maximum_interval=timedelta(seconds=policy.max_interval_s),
                        maximum_attempts=policy.max_attempts,
                    ),
                )
                self._states[step.name] = StepState.COMPENSATED
                return
            except ActivityError as err:
                self._seq += 1
                self._states[step.name] = StepState.COMPENSATION_FAILED
                cause = err.cause
                message = getattr(cause, "message", None) or str(cause or err)
                error_type = getattr(cause, "type", None) or type(cause or err).__name__
                await self._mirror(
                    [
                        self._transition(
                            step.name,
                            StepState.COMPENSATION_FAILED,
                            complete_by=True,
                            last_error=message,
                            error_type=str(error_type),
                        )
                    ],
                    TaskState.ERROR,
                )
            await self._await_retry(step)

    async def _await_retry(self, step: CleanupStep) -> None:
        self._waiting = step.name
        try:
            while True:
                await workflow.wait_condition(lambda: bool(self._requests))
                kind, request = self._requests.pop(0)
                if request.failure_count is not None:
                    self._failure_counts[step.name] = max(self._failure_counts.get(step.name, 0), request.failure_count)
                if kind == "park":
                    self._seq += 1
                    self._states[step.name] = StepState.ERROR
                    await self._mirror([self._transition(step.name, StepState.ERROR)], TaskState.ERROR)
                    continue
                return
        finally:
            self._waiting = None

    @workflow.signal(name="retry")
    def retry(self, request: OperatorRequest) -> None:
        """Retry the undo that failed (the Supervisor's ladder, or an operator)."""
        if self._waiting is None:
            return
        seen = self._failure_counts.get(self._waiting, 0)
        if request.failure_count is not None and request.failure_count <= seen:
            return
        self._requests.append(("retry", request))

    @workflow.signal(name="compensate")
    def compensate(self, request: OperatorRequest) -> None:
        """Same as retry here: the task is being undone already."""
        self.retry(request)

    @workflow.signal(name="park")
    def park(self, request: OperatorRequest) -> None:
        if self._waiting is not None:
            self._requests.append(("park", request))

    @workflow.query(name="status")
    def status(self) -> dict[str, str]:
        return self._states

    def _transition(
        self,
        step: str,
        state: str,
        *,
        complete_by: bool = False,
        last_error: str | None = None,
        error_type: str | None = None,
    ) -> StepTransition:
        return StepTransition(
            task_id=self._input.task_id,
            step=step,
            version=version_of(self._seq),
            state=StepState(state),
            at=workflow.now(),
            # A failed undo's CompleteBy is when the Supervisor should look at it: now.
            complete_by=workflow.now() if complete_by else None,
            failure_count=self._failure_counts.get(step, 0),
            last_error=last_error,
            error_type=error_type,
            run_id=workflow.info().run_id,
            chain_id=self._input.chain_id,
        )

    async def _mirror(self, transitions: list[StepTransition], task_state: TaskState) -> None:
        transitions[-1] = transitions[-1].model_copy(update={"task_state": task_state})
        await workflow.execute_local_activity_method(
            _MirrorWrites.record,
            TransitionBatch(transitions=transitions),
            start_to_close_timeout=_MIRROR_TIMEOUT,
            retry_policy=_MIRROR_RETRY,
            summary=f"record {', '.join(f'{t.step} {t.state}' for t in transitions)} (task {task_state})",
        )
