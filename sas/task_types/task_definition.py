"""A task type, declared as data (``TaskDefinition``): its input model and its stages, each step
naming its Agent, its undo and its policy.

Beyond a straight line of steps (``sas.task_types.steps``), a definition may hold:

- ``Parallel(a, b)``: a group of steps that start together; the task goes on when all are done;
- ``Parallel(Sequence(flight, seat), hotel)``: a group whose members are *branches*: a
  ``Sequence`` runs its members one after the other (steps, waits, conditional steps and nested
  groups), beside the group's other members (``sas.task_types.groups``);
- ``Wait(...)``: a step that waits for a time, or for a named signal (an approval) until a
  deadline, with a declared outcome when the deadline passes;
- ``ForEach("pay", items=..., key=..., forward=..., undo=...)``: a step run once for each item of
  a list taken from the input or an earlier result, in batches, with a bound on how many run at
  once and on how many may fail (``Tolerance``) before the whole task is undone
  (``sas.task_types.fan_out``);
- ``ChildTask(...)``: a step that runs another registered task type as a child task, with its
  own mirror rows and its own Supervisor ladder; undoing the step undoes the child;
- ``when=When(predicate, "why")`` on a step: the step runs only if the predicate, a pure
  function of the input and the earlier steps' results, is true; otherwise it is Skipped and
  the mirror records why.
- ``Choice(Option("express", when=..., then=EXPRESS), otherwise=SHIP)``: one of several paths,
  the first option whose condition holds, else ``otherwise``; the other paths' steps are
  Skipped (``sas.task_types.choices``).

A task type is a ``TaskDefinition`` and its workflow class (``sas.api.task_workflow``), in a
module that sas finds through the ``sas.task_types`` entry point group or the
``SAS_TASK_TYPES__MODULES`` setting (``sas/task_types/discovery.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from sas.task_models import PivotRole, StepPlan
from sas.task_models.ids import NAME, scoped_name
from sas.task_types.choices import Choice, ChoicePath, laid_out
from sas.task_types.groups import Member, Parallel, Sequence, leaves
from sas.task_types.steps import AgentCall, Step, StepContext, StepDefinition

MAX_SUMMARY = 160
"""The most characters of a task type's declared summary shown (the UI cuts long lines)."""
MAX_DETAILS = 2000
"""The most characters of a task type's declared details shown on the workflow page."""
MAX_FAIRNESS_KEY = 64
"""The most bytes of a fairness key Temporal takes."""


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
            of their own. A ``Choice`` is a stage that runs one of its paths.
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
        team: The team that owns the type (1-40 characters from a-z 0-9 _, starting with a
            letter). The type is named under it, ``<team>.<name>`` (``north.booking``; at most
            40 characters in all), so two teams may each have a ``booking``: ``task_type`` reads
            back the scoped name, and so do ``sas submit --type``, the mirror and the UI; its
            workflow type is ``<team>.<Name>Workflow``. Its steps may call its team's own
            services and the platform's. Each of its tasks carries the team as Temporal's
            fairness key, so a backlog is handed out to the teams in turn, weighted by
            ``SAS_TEAMS__<TEAM>__WEIGHT``; its alerts go to its team's webhook. None: today's
            names and no fairness key (docs/task-types.md, "Teams side by side").
        fairness_from: A field of the input whose value is the fairness key instead (a tenant
            id): ``<team>/<value>`` with a team, the value alone without one. A task whose field
            is empty falls back to the team.

    Both run in the workflow too, on every change of the task and again on replay: no clock,
    no I/O, no random. What they answer is shown as text (never as Markdown) and cut to
    ``MAX_SUMMARY`` and ``MAX_DETAILS`` characters; one that raises is left out (sas's neutral
    text stands). Define a function in a module the workflow passes through (as ``When``
    predicates), not in the module that calls ``task_workflow``.
    """

    task_type: str
    input_model: type[BaseModel]
    stages: tuple[Step | Parallel | Choice, ...]
    pivot: str | None = None
    summary: str | Callable[[Mapping[str, Any]], str] | None = None
    details: Callable[[StepContext], str] | None = None
    team: str | None = None
    fairness_from: str | None = None
    _flat: tuple[tuple[Step, int], ...] = field(init=False, repr=False, compare=False)
    _run: tuple[Step | Parallel, ...] = field(init=False, repr=False, compare=False)
    _paths: dict[str, ChoicePath] = field(init=False, repr=False, compare=False)
    # Read by the Scheduler at every step of every run: made once, with the definition.
    _steps: tuple[Step, ...] = field(init=False, repr=False, compare=False)
    _by_name: dict[str, Step] = field(init=False, repr=False, compare=False)
    _stage_of: dict[str, int | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.team is not None and not NAME.fullmatch(self.team):
            raise ValueError(
                f"task type {self.task_type}: team {self.team!r}: use 1-40 characters from a-z 0-9 _,"
                " starting with a letter"
            )
        if not NAME.fullmatch(self.short_name):
            raise ValueError(
                f"task type {self.short_name!r}: use 1-40 characters from a-z 0-9 _, starting with a letter"
            )
        object.__setattr__(self, "task_type", scoped_name(self.team, self.task_type))
        if self.fairness_from is not None and self.fairness_from not in self.input_model.model_fields:
            raise ValueError(
                f"task type {self.task_type}: fairness_from {self.fairness_from!r} is not a field of"
                f" {self.input_model.__name__}"
            )
        run, paths = laid_out(self.stages)
        flat = tuple((step, stage) for stage, item in enumerate(run) for step in leaves(item))
        names = [s.name for s, _ in flat]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"task type {self.task_type}: give one or more steps, each with its own name")
        object.__setattr__(self, "_flat", flat)
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_paths", paths)
        object.__setattr__(self, "_steps", tuple(s for s, _ in flat))
        object.__setattr__(self, "_by_name", {s.name: s for s, _ in flat})
        first: dict[int, int] = {}  # each stage: the position of its first step
        for position, (_, stage) in enumerate(flat):
            first.setdefault(stage, position)
        groups = {step.name: first[stage] if isinstance(run[stage], Parallel) else None for step, stage in flat}
        object.__setattr__(self, "_stage_of", groups)

    @property
    def short_name(self) -> str:
        """The type's name as declared, without its team (``task_type`` is ``<team>.<name>``)."""
        return self.task_type.removeprefix(f"{self.team}.") if self.team is not None else self.task_type

    def fairness_key(self, payload: Mapping[str, Any]) -> str | None:
        """The fairness key a task of this type with input ``payload`` carries: its tenant field's
        value (``fairness_from``, under the team), else the team; None if the type names neither.
        Temporal keeps at most 64 bytes of a key: a longer one is its head and a digest of it all,
        so two tenants never share a key by a common prefix."""
        tenant = payload.get(self.fairness_from) if self.fairness_from is not None else None
        if tenant is None or tenant == "":
            return self.team
        key = f"{self.team}/{tenant}" if self.team is not None else str(tenant)
        if len(key.encode()) <= MAX_FAIRNESS_KEY:
            return key
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return key.encode()[: MAX_FAIRNESS_KEY - 17].decode(errors="ignore") + "~" + digest

    @property
    def run_stages(self) -> tuple[Step | Parallel, ...]:
        """The stages the Scheduler runs: ``stages`` with each ``Choice`` laid out as its paths'
        stages, every step of a path under its path's condition (``sas.task_types.choices``)."""
        return self._run

    def choice_path(self, name: str) -> ChoicePath | None:
        """Where a step of a ``Choice`` is (its choice and path); None for any other step."""
        return self._paths.get(name)

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every step, in declaration order (a parallel group's steps one after the other)."""
        return self._steps

    def stage_of(self, name: str) -> int | None:
        """The stage of a step in a parallel group (in any of its branches): the position of the
        group's first step; the plan records only this, the branches come from the definition.
        None for a step that is a stage of its own (so the plans of straight-line tasks are
        what they always were)."""
        return self._stage_of[name]

    def step(self, name: str) -> Step:
        """The step declared as ``name``; KeyError for a name the type does not declare."""
        return self._by_name[name]

    def stage_item(self, name: str) -> Step | Parallel:
        """The stage a step belongs to, as run: the step itself, or its parallel group."""
        return self._run[next(stage for step, stage in self._flat if step.name == name)]

    def finished_before(self, name: str) -> set[str]:
        """The steps that have finished whenever ``name`` starts: those of the stages before its
        own and, in a branch, the steps before it in its ``Sequence`` (and in the ones around it)."""
        own = next(stage for step, stage in self._flat if step.name == name)
        before = {step.name for step, stage in self._flat if stage < own}
        path = self._paths.get(name)
        if path is not None:
            before -= path.siblings  # another path of its choice: never run with it
        return before | _before_in(self._run[own], name)

    def step_plans(self, task_id: str) -> list[StepPlan]:
        """Each step as a task of this type declares it for the state store to accept: its
        Agents, its idempotency key (``<task>:<step>``), its policy, stage and pivot role."""
        return [
            StepPlan(
                name=step.name,
                position=position,
                agent=step.agent,
                compensation=step.compensation,
                idempotency_key=f"{task_id}:{step.name}",
                policy=step.policy if isinstance(step, StepDefinition) else None,
                stage=self.stage_of(step.name),
                pivot=self.pivot_role(step.name),
            )
            for position, step in enumerate(self.steps)
        ]

    def stages_before(self, name: str) -> list[Step]:
        """The steps of every stage before ``name``'s own, in declaration order: what a redrive
        from ``name`` keeps."""
        own = next(stage for step, stage in self._flat if step.name == name)
        return [step for step, stage in self._flat if stage < own]

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


def definition_of(cls: type) -> TaskDefinition | None:
    """The task type a workflow class runs (a ``task_workflow``'s ``definition``); None for any
    other workflow (the clean-up, a fan-out's batch, the Supervisor)."""
    definition = getattr(cls, "definition", None)
    return definition if isinstance(definition, TaskDefinition) else None
