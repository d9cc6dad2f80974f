"""The operator protocol, as every sas workflow declares it - the task workflows and the
clean-up: the ``retry``, ``compensate`` and ``park`` signals, the ``request_retry`` and
``request_compensate`` updates, the repairs (``request_complete``, ``request_retry_with_input``,
``request_skip``, each with its dry run as a query), and the ``status`` query.

The signals keep the Temporal UI and ``temporal workflow signal`` working; a signal that does
not apply changes nothing and is recorded in ``events``. The updates do the same, but reject
what does not apply in their validator, so the caller gets an immediate answer saying why.
Whether a request applies is decided in the pure core (``workflows/core/requests.py``); what
follows from one that does, in ``shell/decisions.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorAnswer, OperatorRequest, StepState, TaskStatus
    from sas.task_models.activity_defs import agent_result
    from sas.task_models.repairs import InputChange, StepCompletion, StepSkip
    from sas.task_models.results import secret_fields
    from sas.task_models.text import MAX_EVENT_TEXT, bounded
    from sas.workflows.core.requests import (
        compensate_problem,
        complete_problem,
        park_problem,
        retry_problem,
        retry_with_input_problem,
        skip_problem,
    )
    from sas.workflows.definitions import StepDefinition
    from sas.workflows.inputs import decode, short
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.task_run import TaskRun

# A retry sent while undoing names only an undo: asked only when the rule from before would
# have taken it, so runs from before replay as they ran.
NO_FORWARD_RETRY_WHILE_UNDOING = "no-forward-retry-while-undoing"


class OperatorHandlers:
    """The handlers Temporal finds on a sas workflow class. They hold no state of their own:
    the workflow gives them its run and its decisions (``task`` and ``decisions``) as it is
    made, and each handler is a few lines over those."""

    sas_task_workflow = True  # takes exactly one argument (workflows/shell/arguments.py)
    task: TaskRun
    decisions: Decisions

    def current_details_now(self) -> str | None:
        """What the UI shows on the workflow's page, told when its metadata query asks
        (workflows/shell/live_details.py)."""
        return self.task.publisher.details()

    @workflow.signal(name="retry")
    def retry(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Re-run the step that waits for a decision (or retry its failed undo)."""
        request = self._request("retry", raw)
        if request is None:
            return
        core = self.task.core
        problem = retry_problem(core, request)
        if (
            problem
            and retry_problem(core, request, forward_while_undoing=True) is None
            and not workflow.patched(NO_FORWARD_RETRY_WHILE_UNDOING)
        ):
            self.decisions.queue("retry", request)  # a run from before this rule took it, and replays so
            return
        if problem:
            self.decisions.note_overrun(request)
            self.task.event(f"retry from {request.by} ignored: {problem}")
            return
        self.decisions.queue("retry", request, undo=core.compensating)

    @workflow.signal(name="compensate")
    def compensate(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Undo every attempted step, in the reverse order of completion."""
        request = self._request("compensate", raw)
        if request is None:
            return
        problem = compensate_problem(self.task.core, request)
        if problem:
            self.task.event(f"compensate from {request.by} ignored: {problem}")
            return
        self.decisions.note_count(request)
        self.decisions.start_compensation(request)

    @workflow.signal(name="park")
    def park(self, raw: RawValue = None) -> None:  # type: ignore[assignment]
        """Park the waiting step as Error until an operator acts (sent by the Supervisor)."""
        request = self._request("park", raw)
        if request is None:
            return
        problem = park_problem(self.task.core, request)
        if problem:
            self.task.event(f"park from {request.by} ignored: {problem}")
            return
        self.decisions.queue("park", request)

    @workflow.update(name="request_retry")
    def request_retry(self, request: OperatorRequest) -> OperatorAnswer:
        """``retry`` with an answer: accepted, or rejected with the reason."""
        core = self.task.core
        step = self.decisions.queue("retry", request, undo=core.compensating)
        what = "undo of" if step.state != StepState.FAILED and core.compensating else "step"
        return OperatorAnswer(message=f"retrying {what} {step.name}", task_state=core.status.state)

    @request_retry.validator
    def _validate_retry(self, request: OperatorRequest) -> None:
        problem = retry_problem(self.task.core, request)
        if problem:
            raise ValueError(problem)

    @workflow.update(name="request_compensate")
    def request_compensate(self, request: OperatorRequest) -> OperatorAnswer:
        """``compensate`` with an answer: accepted, or rejected with the reason."""
        self.decisions.note_count(request)
        self.decisions.start_compensation(request)
        return OperatorAnswer(
            message="compensating: attempted steps are undone in reverse order", task_state=self.task.core.status.state
        )

    @request_compensate.validator
    def _validate_compensate(self, request: OperatorRequest) -> None:
        problem = compensate_problem(self.task.core, request)
        if problem:
            raise ValueError(problem)

    @workflow.update(name="request_complete")
    def request_complete(self, completion: StepCompletion) -> OperatorAnswer:
        """Complete a step waiting for a decision by hand, with the result its service would
        have answered (an operator made the call some other way); audited, then the task goes on."""
        self.decisions.completions[completion.step] = self._checked_result(completion)
        step = self.decisions.queue("complete", completion.request())
        return OperatorAnswer(message=f"completing step {step.name} by hand", task_state=self.task.core.status.state)

    @request_complete.validator
    def _validate_complete(self, completion: StepCompletion) -> None:
        problem = self._complete_problem(completion)
        if problem:
            raise ValueError(problem)

    @workflow.query(name="check_complete")
    def check_complete(self, completion: StepCompletion) -> str:
        """A dry run of ``request_complete``: why it would be refused, or "" if it would apply
        (a query: nothing is recorded, nothing changes)."""
        return self._complete_problem(completion) or ""

    def _complete_problem(self, completion: StepCompletion) -> str | None:
        problem = complete_problem(self.task.core, completion.request())
        if problem:
            return problem
        definition = getattr(self, "definition", None)
        if definition is None:
            return "a clean-up only undoes: nothing in it is completed by hand"
        declared = definition.step(completion.step)
        if not isinstance(declared, StepDefinition):
            return (
                f"step {completion.step} is a {type(declared).__name__}, not a call: only a call is completed by hand"
            )
        try:
            self._checked_result(completion)
        except ValueError as err:
            return str(err)
        return None

    def _checked_result(self, completion: StepCompletion) -> dict[str, Any]:
        """The result as the step's result model reads it (its Agent's declared one)."""
        model = agent_result(self.task.plans[completion.step].agent)
        if model is None:
            return dict(completion.result)
        try:
            return model.model_validate(completion.result).model_dump(mode="json")
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False)[:3]
            )
            raise ValueError(f"not a {model.__name__}: {problems}") from None

    @workflow.update(name="request_retry_with_input")
    def request_retry_with_input(self, change: InputChange) -> OperatorAnswer:
        """Retry the step waiting for a decision with some of the task's input changed (a bad
        address fixed): checked against the type's input model, audited with what changed, and
        every call from then on made with it."""
        payload, said = self._changed_input(change)
        step = self.decisions.queue("retry", change.request())
        self.decisions.input_changes[step.name] = (payload, said)
        return OperatorAnswer(message=f"retrying step {step.name} with {said}", task_state=self.task.core.status.state)

    @request_retry_with_input.validator
    def _validate_retry_with_input(self, change: InputChange) -> None:
        problem = self._input_problem(change)
        if problem:
            raise ValueError(problem)

    @workflow.query(name="check_retry_with_input")
    def check_retry_with_input(self, change: InputChange) -> str:
        """A dry run of ``request_retry_with_input``: why it would be refused, or "" if it would
        apply (a query: nothing is recorded, nothing changes)."""
        return self._input_problem(change) or ""

    def _input_problem(self, change: InputChange) -> str | None:
        problem = retry_with_input_problem(self.task.core, change.request())
        if problem:
            return problem
        if getattr(self, "definition", None) is None:
            return "a clean-up only undoes: its input is the task's, as it was accepted"
        try:
            self._changed_input(change)
        except ValueError as err:
            return str(err)
        return None

    def _changed_input(self, change: InputChange) -> tuple[dict[str, Any], str]:
        """The task's input with the change, as the type's input model reads it, and what changed
        (a secret field named, never shown)."""
        model = self.definition.input_model  # type: ignore[attr-defined] # a task workflow's (checked above)
        unknown = sorted(set(change.fields) - set(model.model_fields))
        if unknown:
            known = ", ".join(sorted(model.model_fields))
            raise ValueError(f"no field {', '.join(unknown)} in a {model.__name__}; its fields are {known}")
        try:
            payload = model.model_validate({**self.task.payload, **change.fields}).model_dump(mode="json")
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors(include_url=False)[:3]
            )
            raise ValueError(f"not a {model.__name__}: {problems}") from None
        changed = [name for name in sorted(change.fields) if payload.get(name) != self.task.payload.get(name)]
        if not changed:
            raise ValueError("the input already says that: nothing would change")
        hidden = secret_fields(model)
        said = ", ".join(
            f"{name} changed" if name in hidden else f"{name} {self.task.payload.get(name)!r} -> {payload[name]!r}"
            for name in changed
        )
        return payload, bounded(f"input {said}", MAX_EVENT_TEXT // 2)

    @workflow.update(name="request_skip")
    def request_skip(self, skip: StepSkip) -> OperatorAnswer:
        """Skip the step waiting for a decision, where its task type declares it skippable: the
        task goes on without it, and its undo is never called; audited, with the reason."""
        step = self.decisions.queue("skip", skip.request())
        return OperatorAnswer(message=f"skipping step {step.name}", task_state=self.task.core.status.state)

    @request_skip.validator
    def _validate_skip(self, skip: StepSkip) -> None:
        problem = skip_problem(self.task.core, skip.request())
        if problem:
            raise ValueError(problem)

    @workflow.query(name="check_skip")
    def check_skip(self, skip: StepSkip) -> str:
        """A dry run of ``request_skip``: why it would be refused, or "" if it would apply (a
        query: nothing is recorded, nothing changes)."""
        return skip_problem(self.task.core, skip.request()) or ""

    @workflow.query(name="status")
    def status(self) -> TaskStatus:
        return self.task.core.status

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
        self.task.event(f"{signal} signal rejected: invalid request: {problem}")
        return None
