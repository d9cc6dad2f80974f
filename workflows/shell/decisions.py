"""Decisions about a step that waits: the Supervisor's or an operator's ``retry``,
``compensate`` or ``park``, queued on the core as they arrive (``shell/operator.py``) and taken
here, one at a time, by the step that waits for them - forward or undo, in the Scheduler and
the clean-up alike. Also where undoing begins, whoever asked for it."""

from __future__ import annotations

import json
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorRequest, StepState, StepStatus, TaskState
    from sas.task_models.repairs import COMPLETED_BY_HAND, RETRIED_WITH_INPUT, SKIPPED_BY_OPERATOR
    from sas.task_models.text import bounded
    from sas.workflows.core.machine import RequestKind
    from sas.workflows.core.requests import target_step
    from sas.workflows.shell.task_run import AUDIT_EVERY_REQUEST, TaskRun

# Before this patch, a retry the task ignored still raised FailureCount on the step it named, to
# whatever it carried. It counts now only on a running step, where a Supervisor's retry is how it
# counts the step's overruns of its complete-by.
IGNORED_REQUEST_COUNTS_ONLY_OVERRUNS = "ignored-request-counts-only-overruns"
_OVERRUN_STATES = (StepState.PROCESSING, StepState.COMPENSATING)
# A step an operator skipped: Skipped, mirrored and audited here. Runs from before never took a
# skip (no handler accepted one); the marker sets apart the histories that did.
SKIP_BY_OPERATOR = "skip-by-operator"
# How much of a result completed by hand the audit entry quotes.
_MAX_SHOWN = 1000


class Decisions:
    """Waits for, queues and counts the decisions about one task's steps."""

    def __init__(self, run: TaskRun) -> None:
        self.run = run
        # Step name -> the result an operator completed it with (``request_complete``), checked
        # against the step's result model, until the step takes it.
        self.completions: dict[str, dict[str, Any]] = {}
        # Step name -> the task's input with an operator's changes (``request_retry_with_input``),
        # checked against the input model, and what changed, until the step's retry takes it.
        self.input_changes: dict[str, tuple[dict[str, Any], str]] = {}

    async def wait_for(self, name: str, *, compensating: bool) -> Literal["retry", "compensate", "complete", "skip"]:
        """Wait for the Supervisor or an operator to decide about a step that failed (or whose
        undo failed). Parking leaves it waiting, as Error, for an operator; a skip is done here
        (the step Skipped, mirrored and audited), and its caller only goes on."""
        run = self.run
        core, records = run.core, run.records
        step = core.step(name)
        while True:
            await workflow.wait_condition(lambda: core.has_request(name) or (core.compensating and not compensating))
            queued = core.next_request(name)
            if queued is None:
                return "compensate"
            kind, request = queued
            if request.failure_count is not None:
                core.claim_count(name, request)
                run.publish()
            if kind == "park":
                records.advance()
                task_state = TaskState.ERROR
                core.park(name)
                run.publish()
                run.event(f"{name}: parked as Error by {request.by}: {request.reason}")
                run.notify("needs_operator", name, request.reason)
                await records.mirror([records.transition(step, task_state=task_state)])
                if workflow.patched(AUDIT_EVERY_REQUEST):  # parking went unaudited before
                    await records.audit("park", name, request, f"{name} parked as Error")
                continue
            core.operator_answered()
            run.publish()
            run.event(f"{name}: {kind} by {request.by}" + (f": {request.reason}" if request.reason else ""))
            if kind == "complete":
                result = json.dumps(self.completions.get(name, {}), sort_keys=True)
                changed = f"{name} ({step.state}) completed by hand with {bounded(result, _MAX_SHOWN)}"
                await records.audit(COMPLETED_BY_HAND, name, request, changed)
                return "complete"
            if kind == "skip" and workflow.patched(SKIP_BY_OPERATOR):
                await self._skip(name, request)
                return "skip"
            changed_input = self.input_changes.pop(name, None)
            if kind == "retry" and changed_input is not None:
                run.payload, said = changed_input
                run.given = None  # its calls carry the changed input whole
                run.publish()
                run.event(f"{name}: input changed by {request.by}: {said}")
                await records.audit(RETRIED_WITH_INPUT, name, request, f"{name} ({step.state}) retried with {said}")
                return "retry"
            if request.reset_failure_count:
                changed = f"FailureCount {core.reset_failures(name)} -> 0; {name} retried"
                records.advance()
                reset = records.transition(step).model_copy(update={"reset_failure_count": True})
                await records.mirror([reset])
                run.publish()
                await records.audit("resubmit", name, request, changed)
            else:
                await run.audit_request(kind, name, request, f"{name} ({step.state}) {kind}")
            if kind == "compensate" and not compensating:
                return "compensate"
            return "retry"

    async def _skip(self, name: str, request: OperatorRequest) -> None:
        run = self.run
        core, records = run.core, run.records
        was = core.step(name).state
        forced = " (forced past the point of no return)" if request.force and core.past_pivot() else ""
        records.advance()
        step = core.skip_by_operator(name, bounded(f"skipped by {request.by}{forced}: {request.reason}", 300))
        run.publish()
        await records.mirror([records.transition(step, task_state=core.status.state, note=step.note)])
        await records.audit(SKIPPED_BY_OPERATOR, name, request, f"{name} ({was}) skipped{forced}; its undo is not run")

    def queue(self, kind: RequestKind, request: OperatorRequest, *, undo: bool = False) -> StepStatus:
        """Queue a request that applies on the step it targets; returns that step."""
        core = self.run.core
        target = target_step(core, request.step, undo=undo)
        core.claim_count(target.name, request)
        core.queue(target.name, kind, request)
        return target

    def note_count(self, request: OperatorRequest) -> None:
        """A decision that applies takes its FailureCount on the step it names."""
        core = self.run.core
        if request.failure_count is not None and request.step in core.names():
            core.claim_count(request.step, request)

    def note_overrun(self, request: OperatorRequest) -> None:
        """A retry that does not apply is still counted on the running step it names: the
        Supervisor counts the overruns of a running step this way. On a step that is not running
        it changes nothing: a count taken from it would only make the Supervisor's next decision
        about that step carry it, past any bound."""
        core = self.run.core
        if request.failure_count is None or request.step not in core.names():
            return
        step = core.step(request.step)
        if (
            step.state not in _OVERRUN_STATES
            and request.failure_count > step.failure_count
            and workflow.patched(IGNORED_REQUEST_COUNTS_ONLY_OVERRUNS)
        ):
            return
        core.claim_count(request.step, request)

    def start_compensation(self, request: OperatorRequest) -> None:
        """Undoing begins (the attempts under way are cancelled), or, once it has, the undo that
        failed or was parked is retried."""
        run = self.run
        core = run.core
        forced = " (forced past the point of no return)" if request.force and core.past_pivot() else ""
        run.event(f"compensate requested by {request.by}{forced}" + (f": {request.reason}" if request.reason else ""))
        if not core.compensating:
            core.begin_compensation(request)
            for handle in run.inflight.values():
                handle.cancel()
        else:
            self.queue("compensate", request, undo=True)
