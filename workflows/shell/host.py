"""The workflow base class every task workflow and the clean-up share: the task's core, its
records, and the operator protocol - the ``retry``, ``compensate`` and ``park`` signals, the
``request_retry`` and ``request_compensate`` updates, and the ``status`` query.

The signals keep the Temporal UI and ``temporal workflow signal`` working; a signal that does
not apply changes nothing and is recorded in ``events``. The updates do the same, but reject
what does not apply in their validator, so the caller gets an immediate answer saying why.
Whether a request applies is decided in the pure core (``workflows/core/requests.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        OperatorAnswer,
        OperatorRequest,
        StepPlan,
        StepPolicyValues,
        StepState,
        StepStatus,
        TaskState,
        TaskStatus,
    )
    from sas.task_models.text import MAX_EVENT_TEXT, bounded
    from sas.workflows.core.machine import RequestKind, TaskCore
    from sas.workflows.core.requests import compensate_problem, park_problem, retry_problem, target_step
    from sas.workflows.inputs import decode, short
    from sas.workflows.shell.agents import describe
    from sas.workflows.shell.notify import Notifier
    from sas.workflows.shell.publish import Publisher
    from sas.workflows.shell.records import Records

# The status keeps the newest events, each bounded (task_models.text): however many signals a task
# gets and whatever they or its services say, its status query stays far below gRPC's limit.
_MAX_EVENTS = 200
# Before this patch, a retry the task ignored still raised FailureCount on the step it named, to
# whatever it carried. It counts now only on a running step, where a Supervisor's retry is how it
# counts the step's overruns of its complete-by.
IGNORED_REQUEST_COUNTS_ONLY_OVERRUNS = "ignored-request-counts-only-overruns"
_OVERRUN_STATES = (StepState.PROCESSING, StepState.COMPENSATING)
# Before this patch, requests that said they came from sas itself were not audited, whoever
# sent them. Every request is audited now; the state store tells the Supervisor's own.
AUDIT_EVERY_REQUEST = "audit-every-request"
_AUTOMATIC = ("supervisor", "temporal")


class TaskHost:
    """State and operator protocol shared by the Scheduler and the clean-up workflow."""

    sas_task_workflow = True  # takes exactly one argument (workflows/shell/arguments.py)

    def __init__(self) -> None:
        self._core = TaskCore(TaskStatus(task_id="", task_type="", state=TaskState.PENDING, steps=[]), [])
        self._records = Records(task_id="", chain_id=None)
        self._publisher = Publisher()
        self._notifier = Notifier()
        self._plans: dict[str, StepPlan] = {}
        self._compensation_policy = StepPolicyValues()
        self._payload: dict[str, Any] = {}
        # Forward results by step (secret fields included: they go only to the Agents).
        self._results: dict[str, dict[str, Any]] = {}
        self._inflight: dict[str, workflow.ActivityHandle[Any]] = {}
        self._supervisor_id: str | None = None

    # ------------------------------------------------------------ the record

    def _publish(self) -> None:
        self._publisher.publish(self._core.status)

    def _set(self, name: str, state: StepState, task_state: TaskState | None = None) -> StepStatus:
        step = self._core.set(name, state, task_state)
        self._publish()
        return step

    def _set_task(self, task_state: TaskState) -> None:
        self._core.set_task(task_state)
        self._publish()

    def _event(self, text: str) -> None:
        events = self._core.status.events
        events.append(bounded(f"{workflow.now().isoformat(timespec='seconds')} {text}", MAX_EVENT_TEXT))
        dropped = len(events) - _MAX_EVENTS
        if dropped > 0:
            self._core.status.events_dropped += dropped
            del events[:dropped]

    def _notify(self, kind: str, step: str | None = None, detail: str | None = None) -> None:
        results = {s.name: s.result for s in self._core.status.steps if s.result is not None}
        self._notifier.notify(self._core.status, self._records.stamp, kind, results, step, detail)

    async def _audit_request(self, action: str, step: str | None, request: OperatorRequest, changed: str) -> None:
        """Audit a request the task applied. Requests that claimed to be sas's own went
        unaudited before AUDIT_EVERY_REQUEST; replays of those runs keep that."""
        if request.by not in _AUTOMATIC or workflow.patched(AUDIT_EVERY_REQUEST):
            await self._records.audit(action, step, request, changed)

    async def _record_failure(self, name: str, state: StepState, err: ActivityError) -> None:
        message, error_type, permanent = describe(err)
        self._records.advance()
        step, task_state = self._core.record_failure(name, state, message, error_type, permanent)
        self._publish()
        self._event(f"{name}: {state} ({error_type}): {message}")
        self._notify("failed", name, f"{error_type}: {message}")
        # CompleteBy of a Failed step: when the Supervisor should look at it - now.
        await self._records.mirror([self._records.transition(step, task_state=task_state, complete_by=workflow.now())])
        await self._wake_supervisor()

    async def _wake_supervisor(self) -> None:
        """Tell the Supervisor now rather than at its next tick; harmless if it is not running."""
        if not self._supervisor_id:
            return
        try:
            await workflow.get_external_workflow_handle(self._supervisor_id).signal("wake")
        except Exception as err:  # noqa: BLE001 - waking is an optimisation only
            workflow.logger.debug("could not wake the Supervisor: %s", err)

    # ---------------------------------------------------------- decisions

    async def _await_decision(self, name: str, *, compensating: bool) -> Literal["retry", "compensate"]:
        """Wait for the Supervisor or an operator to decide about a step that failed (or whose
        undo failed). Parking leaves it waiting, as Error, for an operator."""
        core = self._core
        step = core.step(name)
        while True:
            await workflow.wait_condition(lambda: core.has_request(name) or (core.compensating and not compensating))
            queued = core.next_request(name)
            if queued is None:
                return "compensate"
            kind, request = queued
            if request.failure_count is not None:
                step.failure_count = max(step.failure_count, request.failure_count)
                self._publish()
            if kind == "park":
                self._records.advance()
                core.status.needs_operator = True  # published by _set below
                task_state = TaskState.ERROR
                self._set(name, StepState.ERROR, task_state)
                self._event(f"{name}: parked as Error by {request.by}: {request.reason}")
                self._notify("needs_operator", name, request.reason)
                await self._records.mirror([self._records.transition(step, task_state=task_state)])
                if workflow.patched(AUDIT_EVERY_REQUEST):  # parking went unaudited before
                    await self._records.audit("park", name, request, f"{name} parked as Error")
                continue
            core.status.needs_operator = False
            self._publish()
            self._event(f"{name}: {kind} by {request.by}" + (f": {request.reason}" if request.reason else ""))
            if request.reset_failure_count:
                changed = f"FailureCount {step.failure_count} -> 0; {name} retried"
                step.failure_count = 0
                self._records.advance()
                reset = self._records.transition(step).model_copy(update={"reset_failure_count": True})
                await self._records.mirror([reset])
                self._publish()
                await self._records.audit("resubmit", name, request, changed)
            else:
                await self._audit_request(kind, name, request, f"{name} ({step.state}) {kind}")
            if kind == "compensate" and not compensating:
                return "compensate"
            return "retry"

    def _queue(self, kind: RequestKind, request: OperatorRequest, *, undo: bool = False) -> StepStatus:
        target = target_step(self._core, request.step, undo=undo)
        self._core.claim_count(target.name, request)
        self._core.queue(target.name, kind, request)
        return target

    def _note_count(self, request: OperatorRequest) -> None:
        """A decision that applies takes its FailureCount on the step it names."""
        if request.failure_count is not None and request.step in self._core.names():
            self._core.claim_count(request.step, request)

    def _note_overrun(self, request: OperatorRequest) -> None:
        """A retry that does not apply is still counted on the running step it names: the
        Supervisor counts the overruns of a running step this way. On a step that is not running
        it changes nothing: a count taken from it would only make the Supervisor's next decision
        about that step carry it, past any bound."""
        if request.failure_count is None or request.step not in self._core.names():
            return
        step = self._core.step(request.step)
        if (
            step.state not in _OVERRUN_STATES
            and request.failure_count > step.failure_count
            and workflow.patched(IGNORED_REQUEST_COUNTS_ONLY_OVERRUNS)
        ):
            return
        self._core.claim_count(request.step, request)

    def _start_compensation(self, request: OperatorRequest) -> None:
        forced = " (forced past the point of no return)" if request.force and self._core.past_pivot() else ""
        self._event(f"compensate requested by {request.by}{forced}" + (f": {request.reason}" if request.reason else ""))
        if not self._core.compensating:
            self._core.begin_compensation(request)
            for handle in self._inflight.values():
                handle.cancel()
        else:
            self._queue("compensate", request, undo=True)  # retry the undo that failed or was parked

    # ------------------------------------------------- signals and updates

    @workflow.signal(name="retry")
    def retry(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Re-run the step that waits for a decision (or retry its failed undo)."""
        request = self._request("retry", raw)
        if request is None:
            return
        problem = retry_problem(self._core, request)
        if problem:
            self._note_overrun(request)
            self._event(f"retry from {request.by} ignored: {problem}")
            return
        self._queue("retry", request)

    @workflow.signal(name="compensate")
    def compensate(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Undo every attempted step, in the reverse order of completion."""
        request = self._request("compensate", raw)
        if request is None:
            return
        problem = compensate_problem(self._core, request)
        if problem:
            self._event(f"compensate from {request.by} ignored: {problem}")
            return
        self._note_count(request)
        self._start_compensation(request)

    @workflow.signal(name="park")
    def park(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Park the waiting step as Error until an operator acts (sent by the Supervisor)."""
        request = self._request("park", raw)
        if request is None:
            return
        problem = park_problem(self._core, request)
        if problem:
            self._event(f"park from {request.by} ignored: {problem}")
            return
        self._queue("park", request)

    @workflow.update(name="request_retry")
    def request_retry(self, request: OperatorRequest) -> OperatorAnswer:
        """``retry`` with an answer: accepted, or rejected with the reason."""
        step = self._queue("retry", request)
        what = "undo of" if step.state != StepState.FAILED and self._core.compensating else "step"
        return OperatorAnswer(message=f"retrying {what} {step.name}", task_state=self._core.status.state)

    @request_retry.validator
    def _validate_retry(self, request: OperatorRequest) -> None:
        problem = retry_problem(self._core, request)
        if problem:
            raise ValueError(problem)

    @workflow.update(name="request_compensate")
    def request_compensate(self, request: OperatorRequest) -> OperatorAnswer:
        """``compensate`` with an answer: accepted, or rejected with the reason."""
        self._note_count(request)
        self._start_compensation(request)
        return OperatorAnswer(
            message="compensating: attempted steps are undone in reverse order", task_state=self._core.status.state
        )

    @request_compensate.validator
    def _validate_compensate(self, request: OperatorRequest) -> None:
        problem = compensate_problem(self._core, request)
        if problem:
            raise ValueError(problem)

    @workflow.query(name="status")
    def status(self) -> TaskStatus:
        return self._core.status

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
        problem = bounded(problem, MAX_EVENT_TEXT)
        workflow.logger.warning("%s signal rejected: %s", signal, problem)
        self._event(f"{signal} signal rejected: invalid request: {problem}")
        return None
