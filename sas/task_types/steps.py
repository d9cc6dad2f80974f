"""A task type's steps: a step with an Agent (``StepDefinition``), a wait (``Wait``) and a child
task (``ChildTask``), with what a condition or a computed value is given (``StepContext``) and a
step's condition (``When``).

A step's Agent is either an ``HttpCall`` (its remote call declared as data,
``sas/task_types/services.py``) or a hand-written Agent, one function declared on its service
(``@PAYMENT.action("charge", ChargeResult) async def charge(call, agent)``). Either declares the
model of its result: that is the step's result, handed to later steps and to the step's own undo.
A step's ``policy.complete_by_s`` is the Agent activity's start-to-close timeout; workers may
override it per task type and step with ``SAS_STEPS__<TYPE>__<STEP>__...`` settings, or per step
name with ``SAS_STEPS__<STEP>__...``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from sas.task_models import StepPolicyValues
from sas.task_models.activity_defs import AgentRef, activity_name, agent_result
from sas.task_models.ids import SCOPED_NAME
from sas.task_types.agent_declarations import agent_reads
from sas.task_types.names import STEP_NAME, check_step_name, default_workflow_name
from sas.task_types.services import HttpCall


@dataclass(frozen=True)
class StepContext:
    """What a condition or a wait's time is computed from: the task's input and the results of
    the steps done so far (by step name). Both are plain JSON values."""

    input: Mapping[str, Any]
    results: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class When:
    """A step's condition. ``predicate`` must be deterministic: it runs inside the workflow, and
    again on every replay (no clock, no I/O, no random). ``unless`` says, for the record, why
    the step is skipped when it is false."""

    predicate: Callable[[StepContext], bool]
    unless: str

    def __post_init__(self) -> None:
        if not self.unless.strip() or len(self.unless) > 200:
            raise ValueError("When(..., unless=...): say in 1-200 characters why the step is skipped")


# What a step's forward action or undo calls: a hand-written Agent's declaration, or an HttpCall.
AgentCall = AgentRef | HttpCall


@dataclass(frozen=True)
class StepDefinition:
    """A step: its forward action, its undo and how it runs.

    Attributes:
        name: 1-32 characters from a-z 0-9 _, starting with a letter; unique in the task type.
            Part of every idempotency key and of the ``SAS_STEPS__<TYPE>__<NAME>__*`` settings.
        forward: What the step does: an ``HttpCall``, or a hand-written Agent's declaration.
        undo: What undoes it, declared the same way. Every undo must be safe to run when the
            forward did nothing. A step without one says why (checked when the type is loaded,
            ``sas/task_types/checks.py``): ``read_only=True``, it comes at or after the task
            type's pivot, or ``irreversible="why"``.
        policy: Its complete-by and quick retries; None: the worker's ``SAS_DEFAULT_STEP__*``.
        when: Run only if this condition holds; otherwise the step is Skipped, with the reason.
        read_only: The step changes nothing at its service (a check, a quote): nothing to undo.
        irreversible: Why the step's effect cannot be undone and need not be (1-200 characters);
            undoing the task leaves it as it is.
        skippable: The task can do without the step: when it fails, an operator may skip it
            (``sas skip``, ``TaskClient.skip_step``, with a reason). It is then Skipped, the task
            goes on, the steps after it find no result of it, and its undo is never called.
    """

    name: str
    forward: AgentCall
    undo: AgentCall | None = None
    # None: the worker's SAS_DEFAULT_STEP__* settings. SAS_STEPS__<TYPE>__<NAME>__* (or, for every
    # type, SAS_STEPS__<NAME>__*) overrides either.
    policy: StepPolicyValues | None = None
    when: When | None = None
    read_only: bool = False
    irreversible: str | None = None
    skippable: bool = False

    # Cached: the Scheduler looks its Agents up by name at every step (TaskDefinition.agents), and
    # a name is found by reading the activity's definition off its declaration. The steps are
    # module constants, shared by every run (this package is passed through the sandbox).
    @cached_property
    def agent(self) -> str:
        """The forward Agent's activity name, as recorded in the plan and the state store."""
        return _agent_name(self.forward)

    @cached_property
    def compensation(self) -> str | None:
        return None if self.undo is None else _agent_name(self.undo)

    @property
    def result(self) -> type[BaseModel] | None:
        """The model of the step's result: its Agent's declared one."""
        return agent_result(self.agent)

    @cached_property
    def reads(self) -> frozenset[str] | None:
        """The earlier steps whose results its forward Agent is sent: a declared call's
        ``Result`` sources, a hand-written Agent's ``reads=``; None: every earlier step's."""
        return results_read_by(self.forward)

    def __post_init__(self) -> None:
        check_step_name(self.name)


def results_read_by(agent: AgentCall) -> frozenset[str] | None:
    """The earlier steps whose results ``agent`` is sent (its declared ``Result`` sources, or a
    hand-written Agent's ``reads=``); None: every earlier step's."""
    return agent.reads if isinstance(agent, HttpCall) else agent_reads(agent)


def _agent_name(call: AgentCall) -> str:
    return call.name if isinstance(call, HttpCall) else activity_name(call)


# What a wait step's deadline does: undo the task, or go on as if the wait had ended well.
DeadlineOutcome = Literal["compensate", "continue"]
MAX_WAIT = timedelta(days=366)


@dataclass(frozen=True)
class Wait:
    """A step that waits, with no Agent and nothing to undo.

    - ``Wait("approval", signal="approve", deadline=timedelta(days=2))``: waits for the signal
      ``approve`` (or the update ``request_approve``) with an ``Approval`` (who, approved or
      not, why). Approved: the task goes on. Rejected: the task is undone. No answer by the
      deadline: ``on_deadline`` (``compensate``, the default, or ``continue``).
    - ``Wait("cool_off", delay=timedelta(hours=1))`` or ``Wait("ship_day", until=lambda ctx: ...)``:
      waits until a time (``until`` gives an aware datetime from the input and results).

    While it waits the step is Waiting: the Supervisor leaves it alone, and ``sas status``,
    ``sas show`` and the UI say what it waits for and until when.
    """

    name: str
    signal: str | None = None
    deadline: timedelta | None = None
    on_deadline: DeadlineOutcome = "compensate"
    delay: timedelta | None = None
    until: Callable[[StepContext], datetime] | None = None
    when: When | None = None
    # No Agent undoes a wait: nothing to undo.
    compensation: ClassVar[None] = None

    def __post_init__(self) -> None:
        check_step_name(self.name)
        if (self.signal is None) == (self.delay is None and self.until is None):
            raise ValueError(f"wait step {self.name}: give a signal (with a deadline), or a delay or an until")
        if self.signal is not None:
            if not STEP_NAME.fullmatch(self.signal):
                raise ValueError(f"wait step {self.name}: signal {self.signal!r}: use a-z 0-9 _")
            if self.deadline is None or not timedelta(0) < self.deadline <= MAX_WAIT:
                raise ValueError(f"wait step {self.name}: a signal wait needs a deadline of at most 366 days")
        if self.delay is not None and not timedelta(0) <= self.delay <= MAX_WAIT:
            raise ValueError(f"wait step {self.name}: a delay of 0 to 366 days")

    @property
    def agent(self) -> str:
        """What the plan and the mirror record in place of an Agent's name."""
        return f"wait.{self.signal or 'time'}"


@dataclass(frozen=True)
class ChildTask:
    """A step that runs another registered task type as a child task: a task of its own (its
    own rows in the state store, its own Supervisor ladder, its own ``sas show``), started as a
    Temporal child workflow with the id ``<parent id>:<step>`` (stable across resets).

    ``ChildTask("notify", task_type="notice", input=lambda ctx: {...})``: ``input`` is a pure
    function of the parent's input and earlier results (it runs inside the workflow, like a
    ``When``) and gives the child's input. The step is Processed when the child ends Processed;
    a child that undid itself (Compensated) fails the step for good - nothing of it to undo.
    Undoing the step undoes the child: cancelled while it runs (it undoes itself), or, once it
    completed, undone by a clean-up its parent starts (docs/how-it-works.md).

    Attributes:
        name: The step's name, as for any step.
        task_type: The child's registered task type (checked when the types are loaded; a type
            may not run itself, directly or through another).
        input: The child's input from the parent's ``StepContext``.
        workflow: The child's workflow type name; default the one ``task_workflow`` gives
            ``task_type`` (``order`` -> ``OrderWorkflow``). Checked against the registry.
        when: Run only if this condition holds; otherwise Skipped, as any step.
    """

    name: str
    task_type: str
    input: Callable[[StepContext], Mapping[str, Any]]
    workflow: str | None = None
    when: When | None = None
    # No Agent undoes it: the Scheduler does, by cancelling or cleaning up the child.
    compensation: ClassVar[None] = None

    def __post_init__(self) -> None:
        check_step_name(self.name)
        if not SCOPED_NAME.fullmatch(self.task_type):
            raise ValueError(f"child step {self.name}: task type {self.task_type!r} is not a task type's name")

    @property
    def workflow_type(self) -> str:
        """The child's workflow type name, as ``task_workflow`` names it unless given."""
        return self.workflow or default_workflow_name(self.task_type)

    @property
    def agent(self) -> str:
        """What the plan and the mirror record in place of an Agent's name."""
        return f"{CHILD_SERVICE}.{self.task_type}"


# What the plan records as a child step's "Agent": child.<its task type>.
CHILD_SERVICE = "child"


Step = StepDefinition | Wait | ChildTask
