"""Task types, declared as data: each step names its Agent, its undo and its policy.

Beyond a straight line of steps, a definition may hold:

- ``Parallel(a, b)``: a group of steps that start together; the task goes on when all are done;
- ``Parallel(Sequence(flight, seat), hotel)``: a group whose members are *branches*: a
  ``Sequence`` runs its members one after the other (steps, waits, conditional steps and nested
  groups), beside the group's other members;
- ``Wait(...)``: a step that waits for a time, or for a named signal (an approval) until a
  deadline, with a declared outcome when the deadline passes;
- ``ForEach("pay", items=..., key=..., forward=..., undo=...)``: a step run once for each item of
  a list taken from the input or an earlier result, in batches, with a bound on how many run at
  once and on how many may fail (``Tolerance``) before the whole task is undone;
- ``ChildTask(...)``: a step that runs another registered task type as a child task, with its
  own mirror rows and its own Supervisor ladder; undoing the step undoes the child;
- ``when=When(predicate, "why")`` on a step: the step runs only if the predicate, a pure
  function of the input and the earlier steps' results, is true; otherwise it is Skipped and
  the mirror records why.

A step's Agent is either an ``HttpCall`` (its remote call declared as data,
``sas/task_types/services.py``) or a hand-written Agent, one function declared on its service
(``@PAYMENT.action("charge", ChargeResult) async def charge(call, agent)``). Either declares the
model of its result: that
is the step's result, handed to later steps and to the step's own undo. A step's
``policy.complete_by_s`` is the Agent activity's start-to-close timeout; workers may override it
per task type and step with ``SAS_STEPS__<TYPE>__<STEP>__...`` settings, or per step name with
``SAS_STEPS__<STEP>__...``.

A task type is a ``TaskDefinition`` and its workflow class (``sas.api.task_workflow``), in a
module that sas finds through the ``sas.task_types`` entry point group or the
``SAS_TASK_TYPES__MODULES`` setting (``sas/task_types/discovery.py``).
"""

from __future__ import annotations

import re
from collections import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel

from sas.task_models import PivotRole, StepPolicyValues
from sas.task_models.activity_defs import AgentRef, activity_name, agent_result
from sas.task_models.ids import MAX_STEP_NAME
from sas.task_types.services import HttpCall

_STEP_NAME = re.compile(rf"[a-z][a-z0-9_]{{0,{MAX_STEP_NAME - 1}}}")
_TASK_TYPE = re.compile(r"[a-z][a-z0-9_]{0,39}")


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

    def __post_init__(self) -> None:
        _check_name(self.name)


def _agent_name(call: AgentCall) -> str:
    return call.name if isinstance(call, HttpCall) else activity_name(call)


def _check_name(name: str) -> None:
    # Checked when the worker imports the definitions, so a bad name never reaches a
    # workflow: the name is part of every idempotency key and a mirror key (sas/task_models/ids.py).
    if not _STEP_NAME.fullmatch(name):
        raise ValueError(f"step name {name!r}: use 1-{MAX_STEP_NAME} characters from a-z 0-9 _, starting with a letter")


MAX_ITEM_KEY = 28
"""An item's key is part of its idempotency key, ``<task>#<n>:<step>:<item>:undo``, which the
services take up to 200 characters: 171 for the step's own (``sas/task_models/ids.py``), one for
the colon, 28 for the item."""
_ITEM_KEY = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ITEM_KEY - 1}}}")


def item_key_problem(key: object) -> str | None:
    """Why ``key`` cannot be an item's key; None if it can."""
    if not isinstance(key, str) or not _ITEM_KEY.fullmatch(key):
        return (
            f"item key {key!r}: use 1-{MAX_ITEM_KEY} characters from A-Z a-z 0-9 . _ -, starting with a letter or digit"
        )
    return None


@dataclass(frozen=True)
class Tolerance:
    """How many of a fan-out's items may fail, as a count, a percentage of the items, or both (the
    smaller bound holds). Within it, the failed items are undone and the task goes on; past it,
    the whole task is undone. ``Tolerance()``: none may fail."""

    count: int | None = None
    percent: float | None = None

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 0:
            raise ValueError("Tolerance(count=...): 0 or more")
        if self.percent is not None and not 0 <= self.percent <= 100:
            raise ValueError("Tolerance(percent=...): 0 to 100")

    def allowed(self, items: int) -> int:
        """How many of ``items`` may fail."""
        bounds = [self.count] if self.count is not None else []
        if self.percent is not None:
            bounds.append(int(items * self.percent / 100))
        return min(bounds, default=0)

    def describe(self) -> str:
        parts = [
            f"{self.count}" if self.count is not None else "",
            f"{self.percent:g}%" if self.percent is not None else "",
        ]
        return " and ".join(p for p in parts if p) or "0"


@dataclass(frozen=True, kw_only=True)
class ForEach(StepDefinition):
    """A step run once for each item of a list: ``forward`` (and ``undo``) are called per item,
    with the item as their input (``Input("amount")`` reads the item's field) under the
    idempotency key ``<task>:<step>:<item key>``.

    ```python
    ForEach(
        "pay",
        items=lambda ctx: ctx.input["recipients"],
        key=lambda item: item["id"],
        forward=PAYROLL.post("/payroll/pay", body={"to": Input("id"), "cents": Input("cents")}, result=Paid),
        undo=PAYROLL.post("/payroll/refund", body={"payment_id": Forward("payment_id")}, result=Refunded),
        max_concurrency=20,
        tolerate=Tolerance(percent=5),
    )
    ```

    Attributes:
        items: The list, from the input and the earlier steps' results; deterministic, like a
            condition (it runs in the workflow). Each item a JSON object.
        key: Each item's own stable key (1-28 characters from A-Z a-z 0-9 . _ -), unique in the
            list: never its position, which can change when the task is resubmitted.
        max_concurrency: How many items are called at once, at most.
        tolerate: How many items may fail after their quick retries (or for good): within it,
            they are undone and the task goes on; past it, the task is undone, every item too.
        batch_size: Items per batch; each batch runs in a child workflow of its own, so that no
            history holds more than one batch's calls.

    The step's result is the count of its items by state; ``sas show`` and the UI give those
    counts, not a row per item.
    """

    items: Callable[[StepContext], abc.Sequence[Mapping[str, Any]]]
    key: Callable[[Mapping[str, Any]], str]
    max_concurrency: int = 20
    tolerate: Tolerance = field(default_factory=Tolerance)
    batch_size: int = 100


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

    def __post_init__(self) -> None:
        _check_name(self.name)
        if (self.signal is None) == (self.delay is None and self.until is None):
            raise ValueError(f"wait step {self.name}: give a signal (with a deadline), or a delay or an until")
        if self.signal is not None:
            if not _STEP_NAME.fullmatch(self.signal):
                raise ValueError(f"wait step {self.name}: signal {self.signal!r}: use a-z 0-9 _")
            if self.deadline is None or not timedelta(0) < self.deadline <= MAX_WAIT:
                raise ValueError(f"wait step {self.name}: a signal wait needs a deadline of at most 366 days")
        if self.delay is not None and not timedelta(0) <= self.delay <= MAX_WAIT:
            raise ValueError(f"wait step {self.name}: a delay of 0 to 366 days")

    @property
    def agent(self) -> str:
        """What the plan and the mirror record in place of an Agent's name."""
        return f"wait.{self.signal or 'time'}"

    @property
    def compensation(self) -> None:
        return None


@dataclass(frozen=True, init=False)
class Parallel:
    """Members that start together: steps, waits, branches (``Sequence``) and nested groups.
    The task goes on when all are done. When one of them fails for good (the task is to be
    undone), those still running are cancelled and nothing new starts in any branch: the
    cancelled calls may have had an effect, so they are undone with the others (every undo is
    safe to run when nothing was done), each branch's steps latest first. The Supervisor's
    ladder and an operator's retry apply to each step on its own."""

    steps: tuple[StepDefinition | Wait | Sequence | Parallel, ...]

    def __init__(self, *steps: StepDefinition | Wait | Sequence | Parallel) -> None:
        if len(steps) < 2:
            raise ValueError("Parallel(...) needs at least two steps")
        object.__setattr__(self, "steps", steps)

    @property
    def branched(self) -> bool:
        """Whether any member is a branch or a group of its own (not a step or a wait)."""
        return any(isinstance(m, Sequence | Parallel) for m in self.steps)


@dataclass(frozen=True, init=False)
class Sequence:
    """A branch of a parallel group: its members - steps, waits, conditional steps, nested
    groups - run one after the other, each once the one before is done, while the group's other
    members run beside it. A step in a branch may use the results of the steps before it in its
    branch and of the stages before the group (``Result``, ``StepContext.results``).

    ``Parallel(Sequence(FLIGHT, SEAT), HOTEL)``: the seat is chosen once the flight is booked,
    while the hotel is booked beside them."""

    steps: tuple[StepDefinition | Wait | Parallel, ...]

    def __init__(self, *steps: StepDefinition | Wait | Parallel) -> None:
        if not steps:
            raise ValueError("Sequence(...) needs at least one step")
        object.__setattr__(self, "steps", steps)


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

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not _TASK_TYPE.fullmatch(self.task_type):
            raise ValueError(f"child step {self.name}: task type {self.task_type!r} is not a task type's name")

    @property
    def workflow_type(self) -> str:
        """The child's workflow type name, as ``task_workflow`` names it unless given."""
        return self.workflow or "".join(part.capitalize() for part in self.task_type.split("_")) + "Workflow"

    @property
    def agent(self) -> str:
        """What the plan and the mirror record in place of an Agent's name."""
        return f"{CHILD_SERVICE}.{self.task_type}"

    @property
    def compensation(self) -> None:
        # No Agent undoes it: the Scheduler does, by cancelling or cleaning up the child.
        return None


# What the plan records as a child step's "Agent": child.<its task type>.
CHILD_SERVICE = "child"


Step = StepDefinition | Wait | ChildTask


# What a stage, a group or a branch holds (a child step only ever a stage of its own).
Member = StepDefinition | Wait | ChildTask | Sequence | Parallel


def leaves(member: Member) -> tuple[StepDefinition | Wait | ChildTask, ...]:
    """The steps, waits and child steps of a stage, a group or a branch, in declaration order."""
    if isinstance(member, Parallel | Sequence):
        return tuple(step for inner in member.steps for step in leaves(inner))
    return (member,)


MAX_SUMMARY = 160
"""The most characters of a task type's declared summary shown (the UI cuts long lines)."""
MAX_DETAILS = 2000
"""The most characters of a task type's declared details shown on the workflow page."""


@dataclass(frozen=True)
class TaskDefinition:
    """A task type: its name, the model of its input and its stages, run in order.

    Attributes:
        task_type: 1-40 characters from a-z 0-9 _, starting with a letter: ``sas submit --type``,
            the mirror's ``task_type``, ``SAS_SUPERVISOR__LADDERS__<TYPE>__*``.
        input_model: The pydantic model of the task's input. Use ``extra="forbid"`` so that a
            misspelt field is refused rather than dropped; ``callback_url``, if it has one, is
            where the task's status events are posted.
        stages: Steps (``StepDefinition``, ``Wait``, ``ChildTask``) and parallel groups
            (``Parallel``), in order; a group's members may be branches (``Sequence``) and groups
            of their own.
        pivot: The name of the task's point of no return: a step of its own stage (not a wait,
            not in a parallel group). Once the pivot has been attempted and may have had its
            effect, the task only goes forward: the steps after it are retried and parked for an
            operator, never undone, and ``compensate`` is refused unless forced. The pivot
            refused for good (proof it did nothing) still undoes the steps before it. None: no
            pivot, every step may be undone.
        summary: The task's one line in the UI (its workflow list, ``sas`` and the workflow's
            current details): a template of input fields (``"{nights} nights in {city}"``) or a pure
            function of the input (``lambda order: ...``), which gets the input as JSON values,
            its ``Secret`` fields left out. None: sas says only the type, the id and the steps.
        details: The task's story on its workflow page: a pure function of a ``StepContext``
            (the input and the results of the steps done so far, their ``Secret`` fields left
            out), answering plain text, a paragraph a line. None: nothing beyond sas's own.

    Both run in the workflow too, on every change of the task and again on replay: no clock,
    no I/O, no random. What they answer is shown as text (never as Markdown) and cut to
    ``MAX_SUMMARY`` and ``MAX_DETAILS`` characters; one that raises is left out (sas's neutral
    text stands). Define a function in a module the workflow passes through (as ``When``
    predicates), not in the module that calls ``task_workflow``.
    """

    task_type: str
    input_model: type[BaseModel]
    stages: tuple[Step | Parallel, ...]
    pivot: str | None = None
    summary: str | Callable[[Mapping[str, Any]], str] | None = None
    details: Callable[[StepContext], str] | None = None
    _flat: tuple[tuple[Step, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _TASK_TYPE.fullmatch(self.task_type):
            raise ValueError(
                f"task type {self.task_type!r}: use 1-40 characters from a-z 0-9 _, starting with a letter"
            )
        flat = tuple((step, stage) for stage, item in enumerate(self.stages) for step in leaves(item))
        names = [s.name for s, _ in flat]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"task type {self.task_type}: give one or more steps, each with its own name")
        object.__setattr__(self, "_flat", flat)

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every step, in declaration order (a parallel group's steps one after the other)."""
        return tuple(s for s, _ in self._flat)

    def stage_of(self, name: str) -> int | None:
        """The stage of a step in a parallel group (in any of its branches): the position of the
        group's first step; the plan records only this, the branches come from the definition.
        None for a step that is a stage of its own (so the plans of straight-line tasks are
        what they always were)."""
        for step, stage in self._flat:
            if step.name == name:
                if not isinstance(self.stages[stage], Parallel):
                    return None
                return next(i for i, (_, other) in enumerate(self._flat) if other == stage)
        raise KeyError(name)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def stage_item(self, name: str) -> Step | Parallel:
        """The stage a step belongs to, as declared: the step itself, or its parallel group."""
        return self.stages[next(stage for step, stage in self._flat if step.name == name)]

    def finished_before(self, name: str) -> set[str]:
        """The steps that have finished whenever ``name`` starts: those of the stages before its
        own and, in a branch, the steps before it in its ``Sequence`` (and in the ones around it)."""
        own = next(stage for step, stage in self._flat if step.name == name)
        before = {step.name for step, stage in self._flat if stage < own}
        return before | _before_in(self.stages[own], name)

    def pivot_role(self, name: str) -> PivotRole | None:
        """``pivot`` for the pivot, ``forward_only`` for a step of a later stage, None before it
        (or in a task type without a pivot)."""
        if self.pivot is None:
            return None
        stage = {step.name: stage for step, stage in self._flat}
        if name == self.pivot:
            return "pivot"
        if self.pivot in stage and stage[name] > stage[self.pivot]:
            return "forward_only"
        return None

    def agents(self) -> dict[str, AgentCall]:
        """Every Agent of the task type by activity name: the Scheduler finds a step's typed
        reference here from the name its accepted plan recorded."""
        agents = [s for s in self.steps if isinstance(s, StepDefinition)]
        refs = [(s.agent, s.forward) for s in agents]
        refs += [(s.compensation, s.undo) for s in agents if s.compensation is not None and s.undo is not None]
        return dict(refs)


def _before_in(member: Member, name: str) -> set[str]:
    """The steps of ``member`` that finish before ``name`` (one of its steps) starts."""
    if isinstance(member, Parallel):
        inner = next((m for m in member.steps if name in {s.name for s in leaves(m)}), None)
        return set() if inner is None else _before_in(inner, name)
    if isinstance(member, Sequence):
        done: set[str] = set()
        for inner in member.steps:
            names = {s.name for s in leaves(inner)}
            if name in names:
                return done | _before_in(inner, name)
            done |= names
    return set()
