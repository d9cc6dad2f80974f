"""Wait steps: a step that waits until a time, or for a named signal (an approval) until a
deadline (workflows/definitions.py, ``Wait``).

While it waits the step is Waiting in the mirror, with a note that says what it waits for and
until when, and CompleteBy at the deadline; the Supervisor never looks at a Waiting step. The
signal ``<name>`` and the update ``request_<name>`` take an ``Approval``: approved, the step
is Processed (its result says who approved and why); rejected, the task is undone. When the
deadline passes, the step's ``on_deadline`` applies.

Their names are the task type's own, so their handlers are registered as the workflow is made
(``workflow.set_signal_handler``), not declared on its class.
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
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.task_run import TaskRun


def _utc(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M UTC")


class Waits:
    """Runs a task's wait steps and takes the approvals they wait for."""

    def __init__(self, run: TaskRun, decisions: Decisions, waits: list[Wait]) -> None:
        self.run = run
        self.decisions = decisions
        self._approvals: dict[str, Approval] = {}
        # Each wait step's signal and update, once per name.
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
                self.run.event(f"{signal} signal rejected: invalid request: {short(err)}")
                return
            except ValueError as err:
                self.run.event(f"{signal} signal rejected: invalid request: {err}")
                return
            problem = approval_problem(self.run.core, approval, signal)
            if problem:
                self.run.event(f"{signal} from {approval.by} ignored: {problem}")
                return
            self._take_approval(signal, approval)

        return handler

    def _approval_update(self, signal: str) -> Any:
        def handler(approval: Approval) -> OperatorAnswer:
            step = self._take_approval(signal, approval)
            verdict = "approved" if approval.approved else "rejected: the task is undone"
            return OperatorAnswer(message=f"{step} {verdict}", task_state=self.run.core.status.state)

        return handler

    def _approval_validator(self, signal: str) -> Any:
        def validator(approval: Approval) -> None:
            problem = approval_problem(self.run.core, approval, signal)
            if problem:
                raise ValueError(problem)

        return validator

    def _take_approval(self, signal: str, approval: Approval) -> str:
        core = self.run.core
        name = approval.step or next(
            s.name for s in core.status.steps if s.state == StepState.WAITING and core.planned(s.name).signal == signal
        )
        self._approvals[name] = approval
        return name

    async def step(self, name: str, wait: Wait) -> None:
        """Run one wait step: Waiting until its time, its approval or its deadline."""
        run = self.run
        core, records = run.core, run.records
        records.advance()
        now = workflow.now()
        if wait.signal is not None:
            assert wait.deadline is not None
            until = now + wait.deadline
            then = "the task is undone" if wait.on_deadline == "compensate" else "it goes on"
            note = f"waits for '{wait.signal}' until {_utc(until)}; then {then}"
        else:
            context = StepContext(input=run.payload, results=run.results)
            until = wait.until(context) if wait.until is not None else now + (wait.delay or timedelta(0))
            note = f"waits until {_utc(until)}"
        core.start(name, StepState.WAITING)
        step = core.set(name, note=note, wait_until=until, waits_for=wait.signal)
        run.publish()
        run.event(f"{name}: {note}")
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
                core.set(name, note=f"rejected by {said}")
                rejected = OperatorRequest(by=approval.by, reason=f"{name} rejected: {approval.reason}")
                self.decisions.start_compensation(rejected)
                return
            approved = f"approved by {said}"
            core.set(name, note=approved)
            result = {"approved_by": approval.by, "reason": approval.reason, "at": workflow.now().isoformat()}
            await records.audit("approve", name, OperatorRequest(by=approval.by, reason=approval.reason), approved)
            records.advance()
        elif wait.signal is not None and wait.on_deadline == "compensate":
            core.set(name, note=f"no answer by {_utc(until)}: the task is undone")
            run.event(f"{name}: {step.note}")
            unanswered = OperatorRequest(by="deadline", reason=f"{name}: no answer by {_utc(until)}")
            self.decisions.start_compensation(unanswered)
            return
        else:
            core.set(
                name, note=f"no answer by {_utc(until)}: went on" if wait.signal else f"waited until {_utc(until)}"
            )
            result = {"waited_until": until.isoformat()}
        core.set(name, result=result)
        run.results[name] = result
        task_state = core.done(name)
        run.publish()
        run.event(f"{name}: {step.note}")
        await records.mirror([records.transition(step, task_state=task_state, note=step.note, result=result)])
        run.notify("step_completed", name)
