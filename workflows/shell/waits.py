"""Wait steps: a step that waits until a time, or for a named signal (an approval) until a
deadline (workflows/definitions.py, ``Wait``).

While it waits the step is Waiting in the mirror, with a note that says what it waits for and
until when, and CompleteBy at the deadline; the Supervisor never looks at a Waiting step. The
signal ``<name>`` and the update ``request_<name>`` take an ``Approval``: approved, the step
is Processed (its result says who approved and why); rejected, the task is undone. When the
deadline passes, the step's ``on_deadline`` applies.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import Approval, OperatorAnswer, OperatorRequest, StepState
    from sas.workflows.core.requests import approval_problem
    from sas.workflows.definitions import StepContext, Wait
    from sas.workflows.inputs import decode, short
    from sas.workflows.shell.host import TaskHost


def _utc(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


class WaitSteps(TaskHost):
    def _listen_for_approvals(self, waits: list[Wait]) -> None:
        """Register each wait step's signal and update (once per name)."""
        self._approvals: dict[str, Approval] = {}
        for signal in dict.fromkeys(w.signal for w in waits if w.signal):
            workflow.set_signal_handler(signal, self._approval_signal(signal))
            workflow.set_update_handler(
                f"request_{signal}", self._approval_update(signal), validator=self._approval_validator(signal)
            )

    def _approval_signal(self, signal: str) -> Any:
        def handler(raw: RawValue) -> None:
            try:
                decoded = decode(raw)
                approval = Approval() if decoded is None else Approval.model_validate(decoded)
            except ValidationError as err:
                self._event(f"{signal} signal rejected: invalid request: {short(err)}")
                return
            except ValueError as err:
                self._event(f"{signal} signal rejected: invalid request: {err}")
                return
            problem = approval_problem(self._core, approval, signal)
            if problem:
                self._event(f"{signal} from {approval.by} ignored: {problem}")
                return
            self._take_approval(signal, approval)

        return handler

    def _approval_update(self, signal: str) -> Any:
        def handler(approval: Approval) -> OperatorAnswer:
            step = self._take_approval(signal, approval)
            verdict = "approved" if approval.approved else "rejected: the task is undone"
            return OperatorAnswer(message=f"{step} {verdict}", task_state=self._core.status.state)

        return handler

    def _approval_validator(self, signal: str) -> Any:
        def validator(approval: Approval) -> None:
            problem = approval_problem(self._core, approval, signal)
            if problem:
                raise ValueError(problem)

        return validator

    def _take_approval(self, signal: str, approval: Approval) -> str:
        core = self._core
        name = approval.step or next(
            s.name for s in core.status.steps if s.state == StepState.WAITING and core.planned(s.name).signal == signal
        )
        self._approvals[name] = approval
        return name

    async def _run_wait(self, name: str, wait: Wait) -> None:
        core, records = self._core, self._records
        records.advance()
        now = workflow.now()
        if wait.signal is not None:
            assert wait.deadline is not None
            until = now + wait.deadline
            then = "the task is undone" if wait.on_deadline == "compensate" else "it goes on"
            note = f"waits for '{wait.signal}' until {_utc(until)}; then {then}"
        else:
            context = StepContext(input=self._payload, results=self._results)
            until = wait.until(context) if wait.until is not None else now + (wait.delay or timedelta(0))
            note = f"waits until {_utc(until)}"
        step = core.start(name, StepState.WAITING)
        step.note, step.wait_until, step.waits_for = note, until, wait.signal
        self._publish()
        self._event(f"{name}: {note}")
        await records.mirror([records.transition(step, task_state=core.status.state, complete_by=until, note=note)])
        remaining = (until - workflow.now()).total_seconds()
        answered = False
        if remaining > 0:
            try:
                await workflow.wait_condition(lambda: name in self._approvals or core.compensating, timeout=remaining)
                answered = True
            except TimeoutError:
                pass
        if core.compensating:
            return  # undone with the others: a wait interrupted is Skipped
        records.advance()
        result: dict[str, Any]
        if answered and name in self._approvals:
            approval = self._approvals.pop(name)
            said = f"{approval.by}" + (f": {approval.reason}" if approval.reason else "")
            if not approval.approved:
                step.note = f"rejected by {said}"
                self._start_compensation(OperatorRequest(by=approval.by, reason=f"{name} rejected: {approval.reason}"))
                return
            step.note = f"approved by {said}"
            result = {"approved_by": approval.by, "reason": approval.reason, "at": workflow.now().isoformat()}
            await records.audit("approve", name, OperatorRequest(by=approval.by, reason=approval.reason), step.note)
            records.advance()
        elif wait.signal is not None and wait.on_deadline == "compensate":
            step.note = f"no answer by {_utc(until)}: the task is undone"
            self._event(f"{name}: {step.note}")
            self._start_compensation(OperatorRequest(by="deadline", reason=f"{name}: no answer by {_utc(until)}"))
            return
        else:
            step.note = f"no answer by {_utc(until)}: went on" if wait.signal else f"waited until {_utc(until)}"
            result = {"waited_until": until.isoformat()}
        step.result = result
        self._results[name] = result
        task_state = core.done(name)
        self._publish()
        self._event(f"{name}: {step.note}")
        await records.mirror([records.transition(step, task_state=task_state, note=step.note, result=result)])
        self._notify("step_completed", name)
