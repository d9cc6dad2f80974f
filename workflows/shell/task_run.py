"""One task's run, as its workflow's collaborators share it: the pure core (the rules), the
records (the mirror and the audit log), what the Temporal UI is shown and what the submitter is
told, and what the accepted plan said of each step. The Scheduler's collaborators and the
clean-up's each take it in their constructor; it is the one holder of the run's state.

The core is replaced once the task is accepted (the plan the state store accepted may say
more than the definition), so a collaborator reads ``run.core`` each time, never keeps it.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        OperatorRequest,
        StepPlan,
        StepPolicyValues,
        StepState,
        StepStatus,
        StepTransition,
        TaskState,
        TaskStatus,
    )
    from sas.task_models.seals import REFUSED_RESULT
    from sas.task_models.text import MAX_EVENT_TEXT, bounded
    from sas.workflows.core.machine import KEEP, Keep, TaskCore
    from sas.workflows.shell.agents import FOREIGN_RESULT, describe
    from sas.workflows.shell.notify import Notifier
    from sas.workflows.shell.publish import Publisher
    from sas.workflows.shell.records import Records

# The status keeps the newest events, each bounded (task_models.text): however many signals a task
# gets and whatever they or its services say, its status query stays far below gRPC's limit.
_MAX_EVENTS = 200
# Before this patch, requests that said they came from sas itself were not audited, whoever
# sent them. Every request is audited now; the state store tells the Supervisor's own.
AUDIT_EVERY_REQUEST = "audit-every-request"
_AUTOMATIC = ("supervisor", "temporal")
# A failure's wake is sent by the activity that records it; runs from before it signal from the workflow.
WAKE_FROM_THE_RECORD = "supervisor-woken-by-the-failure-record"


def _no_task() -> TaskCore:
    return TaskCore(TaskStatus(task_id="", task_type="", state=TaskState.PENDING, steps=[]), [])


class TaskRun:
    """The state of one task's run and the outlets every change goes through."""

    def __init__(self, core: TaskCore | None = None, records: Records | None = None) -> None:
        self.core = core or _no_task()
        self.records = records or Records(task_id="", chain_id=None)
        self.publisher = Publisher()
        self.notifier = Notifier()
        self.plans: dict[str, StepPlan] = {}
        self.compensation_policy = StepPolicyValues()
        self.payload: dict[str, Any] = {}
        # The input fields its submitter set; None: every field (an input changed since, a clean-up's).
        self.given: frozenset[str] | None = None
        # Forward results by step (secret fields included: they go only to the Agents).
        self.results: dict[str, dict[str, Any]] = {}
        # The forward attempts under way, cancelled when undoing begins.
        self.inflight: dict[str, workflow.ActivityHandle[Any]] = {}
        self.supervisor_id: str | None = None
        # Whether its calls are compact (StepCall.compact_for): its plan is, so every worker reads them.
        self.compact_calls = False

    def publish(self) -> None:
        self.publisher.publish(self.core.status, self.payload)

    @property
    def call_payload(self) -> dict[str, Any]:
        """The input an Agent's call carries: the fields its submitter set, as the task's start
        holds them. Its worker fills the defaults in again from the task type's input model
        (``sas/runtime/whole_calls.py``), so no call's history event repeats them."""
        if self.given is None:
            return self.payload
        return {name: value for name, value in self.payload.items() if name in self.given}

    def set(
        self, name: str, state: StepState, task_state: TaskState | None = None, *, note: str | Keep | None = KEEP
    ) -> StepStatus:
        """The core's change, then the UI's view of it."""
        step = self.core.set(name, state, task_state, note=note)
        self.publish()
        return step

    def set_task(self, task_state: TaskState) -> None:
        self.core.set_task(task_state)
        self.publish()

    def event(self, text: str) -> None:
        events = self.core.status.events
        events.append(bounded(f"{workflow.now().isoformat(timespec='seconds')} {text}", MAX_EVENT_TEXT))
        dropped = len(events) - _MAX_EVENTS
        if dropped > 0:
            self.core.status.events_dropped += dropped
            del events[:dropped]

    def notify(self, kind: str, step: str | None = None, detail: str | None = None) -> None:
        results = {s.name: s.result for s in self.core.status.steps if s.result is not None}
        self.notifier.notify(self.core.status, self.records.stamp, kind, results, step, detail)

    async def audit_request(self, action: str, step: str | None, request: OperatorRequest, changed: str) -> None:
        """Audit a request the task applied. Requests that claimed to be sas's own went
        unaudited before AUDIT_EVERY_REQUEST; replays of those runs keep that."""
        if request.by not in _AUTOMATIC or workflow.patched(AUDIT_EVERY_REQUEST):
            await self.records.audit(action, step, request, changed)

    async def record_failure(self, name: str, state: StepState, err: ActivityError) -> None:
        """A step (or its undo) failed after its Agent's quick retries: say so everywhere, and
        wake the Supervisor, which decides what follows."""
        await self.record_failure_as(name, state, *describe(err))

    async def record_failure_as(
        self, name: str, state: StepState, message: str, error_type: str, permanent: bool
    ) -> None:
        """``record_failure`` of a failure the Scheduler itself found (a result it refused)."""
        self.records.advance()
        step, task_state = self.core.record_failure(name, state, message, error_type, permanent)
        self.publish()
        self.event(f"{name}: {state} ({error_type}): {message}")
        self.notify("failed", name, f"{error_type}: {message}")
        # CompleteBy of a Failed step: when the Supervisor should look at it - now.
        await self.mirror_failure([self.records.transition(step, task_state=task_state, complete_by=workflow.now())])

    async def refuse_result(self, name: str, state: StepState, why: str) -> None:
        """A result no Agent of sas sealed (``agents.foreign_claim``): audited with what it claimed,
        then the step's failure for good, as if its answer were lost and the service had said no:
        its undo asks the service's lookup what was really done."""
        await self.audit_refused_result(name, why)
        await self.record_failure_as(name, state, why, FOREIGN_RESULT, True)

    async def audit_refused_result(self, name: str, why: str) -> None:
        """The audit entry (and, with it, the critical alert) of a result the Scheduler refused."""
        await self.records.audit(REFUSED_RESULT, name, OperatorRequest(by="sas", reason="not sealed by an Agent"), why)

    async def mirror_failure(self, transitions: list[StepTransition]) -> None:
        """Record a failure and wake the Supervisor. The record's activity wakes it: a signal from
        the workflow came back as an event, whose workflow task, waiting behind a busy queue, made
        the task look busy to the Supervisor just when it came to decide, and put it off."""
        if self.supervisor_id and workflow.patched(WAKE_FROM_THE_RECORD):
            await self.records.mirror(transitions, wake=self.supervisor_id)
        else:
            await self.records.mirror(transitions)
            await self.wake_supervisor()

    async def wake_supervisor(self) -> None:
        """Tell the Supervisor now rather than at its next tick; harmless if it is not running."""
        if not self.supervisor_id:
            return
        try:
            await workflow.get_external_workflow_handle(self.supervisor_id).signal("wake")
        except Exception as err:  # noqa: BLE001 - waking is an optimisation only
            workflow.logger.debug("could not wake the Supervisor: %s", err)
