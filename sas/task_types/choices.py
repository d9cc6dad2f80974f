"""One of several paths (``Choice``): the first ``Option`` whose condition holds runs, else the
``otherwise`` path; the other paths' steps are Skipped, each with the reason.

``Choice(Option("express delivery", when=lambda ctx: ctx.input["express"], then=EXPRESS), otherwise=SHIP)``

A choice is a stage of its own. The Scheduler runs it as its paths' stages one after the other,
each step of a path under its path's condition (``laid_out``): the same ``When`` a step may carry
by hand, so a choice adds no workflow code and replays as conditions always have. What makes it
one construct, not conditions kept in step by hand:

- **one decision:** the options are asked in order, and the first that holds is the path taken,
  so two paths never both run and the ``otherwise`` path runs exactly when no option holds;
- **asked once:** each option sees the input and the results of the steps *before* the choice
  only, so a path's own results never change which path its later steps are on;
- **checked when the type loads** (``sas/task_types/checks.py``): two or more paths, labels of
  their own, no ``when=`` on a path's steps, no pivot in a path, and no step naming a result of
  another path (it never runs beside it);
- **shown** by ``sas types`` (``(express | ship)`` in the flow, and a line per choice) and on the
  workflow page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sas.task_types.groups import Member, Parallel, Sequence, leaves
from sas.task_types.steps import ChildTask, StepContext, StepDefinition, Wait, When

MAX_LABEL = 80
"""The most characters of an option's label: it is part of each of its steps' skip reason."""
OTHERWISE = "otherwise"

# What a path holds: one step, a Sequence of them (run in order), or a parallel group.
Path = StepDefinition | Wait | ChildTask | Sequence | Parallel


@dataclass(frozen=True)
class Option:
    """One path of a ``Choice``: taken when ``when`` holds (and no option before it did).

    Attributes:
        label: What the path is for, in 1-80 characters (``"express delivery"``): shown by
            ``sas types`` and in the reason its steps are Skipped when another path is taken.
        when: A pure function of the input and the results of the steps before the choice,
            as a ``When`` predicate is (no clock, no I/O, no random).
        then: The path: a step, a ``Sequence`` of steps run in order, or a ``Parallel`` group.
    """

    label: str
    when: Callable[[StepContext], bool]
    then: Path

    def __post_init__(self) -> None:
        if not self.label.strip() or len(self.label) > MAX_LABEL or self.label == OTHERWISE:
            raise ValueError(f"Option({self.label!r}, ...): give a label of 1-{MAX_LABEL} characters, not 'otherwise'")


@dataclass(frozen=True, init=False)
class Choice:
    """One of several paths: the first option whose condition holds, else ``otherwise`` (None:
    no path, every path's steps Skipped). A stage of its own, never in a parallel group."""

    options: tuple[Option, ...]
    otherwise: Path | None

    def __init__(self, *options: Option, otherwise: Path | None = None) -> None:
        if not options or len(options) + (otherwise is not None) < 2:
            raise ValueError("Choice(...) needs two or more paths: options, or one option and otherwise=...")
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "otherwise", otherwise)

    @property
    def paths(self) -> tuple[tuple[str, Path], ...]:
        """Each path with its label, ``otherwise`` last."""
        found = tuple((o.label, o.then) for o in self.options)
        return found if self.otherwise is None else (*found, (OTHERWISE, self.otherwise))

    def taken(self, context: StepContext) -> int | None:
        """The position of the path taken for ``context`` (in ``paths``); None if none is."""
        for position, option in enumerate(self.options):
            if option.when(context):
                return position
        return None if self.otherwise is None else len(self.options)


@dataclass(frozen=True)
class _OnPath:
    """The condition of every step of one path: its choice takes it, asked with the results of
    the steps before the choice only (``before``), so the answer is the same at every step."""

    choice: Choice
    position: int
    before: frozenset[str]

    def __call__(self, context: StepContext) -> bool:
        seen = StepContext(input=context.input, results={k: v for k, v in context.results.items() if k in self.before})
        return self.choice.taken(seen) == self.position


@dataclass(frozen=True)
class ChoicePath:
    """Where a step of a choice is: its choice's position among the declared stages, and its path."""

    choice: int
    label: str
    siblings: frozenset[str]
    """The steps of the choice's other paths: never run beside this one."""


def laid_out(stages: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, ChoicePath]]:
    """The stages the Scheduler runs: each ``Choice`` laid out as its paths' stages, every step of
    a path under its path's condition; and where each step of a choice is. A path's step that has
    a ``when=`` of its own keeps it here (``checks.py`` refuses it, naming the step)."""
    run: list[Any] = []
    where: dict[str, ChoicePath] = {}
    for position, stage in enumerate(stages):
        if not isinstance(stage, Choice):
            _no_choice_in(stage)
            run.append(stage)
            continue
        for _, path in stage.paths:
            if isinstance(path, Choice):
                raise ValueError(NESTED)
            _no_choice_in(path)
        before = frozenset(s.name for earlier in run for s in leaves(earlier))
        names = [{s.name for s in leaves(path)} for _, path in stage.paths]
        for index, (label, path) in enumerate(stage.paths):
            condition = When(_OnPath(stage, index, before), _skip_reason(stage, label))
            others = frozenset().union(*(n for i, n in enumerate(names) if i != index))
            for name in names[index]:
                where[name] = ChoicePath(position, label, others)
            members = path.steps if isinstance(path, Sequence) else (path,)
            run += [_under(member, condition) for member in members]
    return tuple(run), where


NESTED = "a Choice is a stage of its own, not in a parallel group, a branch or another Choice"


def _no_choice_in(member: Any) -> None:
    """ValueError if a choice is inside a group or a branch: it is a stage of its own."""
    for each in member.steps if isinstance(member, Parallel | Sequence) else ():
        if isinstance(each, Choice):
            raise ValueError(NESTED)
        _no_choice_in(each)


def _skip_reason(choice: Choice, label: str) -> str:
    if label != OTHERWISE:
        return f"another path was chosen: this one is for {label}"
    return "another path was chosen: this one is for when no option holds"


def _under(member: Member, condition: When) -> Any:
    """``member`` with every step in it under ``condition``."""
    if isinstance(member, Parallel):
        return Parallel(*(_under(m, condition) for m in member.steps))
    if isinstance(member, Sequence):
        return Sequence(*(_under(m, condition) for m in member.steps))
    return member if member.when is not None else replace(member, when=condition)
