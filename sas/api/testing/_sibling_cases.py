"""The failure matrix's cases for parallel groups: one sibling refused for good while another is
before, during or after its call, and two refused at once. Generated from the task's
definition; each case sets gates on the fakes (``FakeAgents.before_call``, ``.at_service``)
so that the order it names is the order that happens, whatever order the worker runs the
calls in - no clock is involved:

- **before**: the other sibling's attempt has started but its call has not left when the
  refusal comes; it is held there until the Scheduler, undoing, cancels it, so nothing is sent;
- **during**: the other's call is at its service when the refusal comes; the service holds it
  until the Scheduler cancels the attempt, then it lands, and the attempt ends cancelled after
  the answer (as the real Agent does): the worst moment for it to land;
- **after**: the other's call completed, and the Scheduler saw it, before the refusal;
- **at once**: two siblings are refused together, and both refusals are in before undoing
  is decided.

The group's remaining siblings (in groups of three or more) complete before the refusal. In a
group with branches (``Sequence``), the cases are those of every two steps that run side by
side - never two of one branch, which run in turn - and what comes before each of them in its
branch completes before the refusal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from sas.api.testing._fakes import FakeAgents
from sas.task_models import StepCall, StepState, TaskStatus
from sas.task_types.groups import Parallel, leaves
from sas.task_types.steps import StepDefinition
from sas.task_types.task_definition import TaskDefinition

Timing = Literal["before", "during", "after"]
TIMINGS: tuple[Timing, ...] = ("before", "during", "after")

# How often a refusal that waits for a sibling to complete asks the task's status.
_POLL_S = 0.05


@dataclass(frozen=True)
class SiblingCase:
    """One timing of a parallel group's calls.

    Attributes:
        group: The group's steps that run for this input, in declared order.
        refused: The sibling refused for good, or the two refused at once.
        other: The sibling whose call is timed against the refusal (None: refused at once).
        timing: Where ``other``'s call is when the refusal comes.
    """

    group: tuple[StepDefinition, ...]
    refused: tuple[StepDefinition, ...]
    other: StepDefinition | None = None
    timing: Timing | None = None
    # In a group with branches: the steps that complete before the refusal (those before the
    # refused ones in their branches, and before and with ``other`` when it completes first).
    # None: every sibling but the refused and the timed one, as in a group of steps.
    complete_first: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        if self.other is None:
            return " and ".join(s.name for s in self.refused) + " refused at once"
        return f"{self.refused[0].name} refused {self.timing} {self.other.name}'s call"

    def refusals_in(self, status: TaskStatus) -> bool:
        """Whether the Scheduler has every refusal of the case, so undoing may be decided: siblings
        refused at once are both Failed before either is decided on (one refusal still on its way
        as undoing cancels its attempt would be another case: one sibling during the other's call)."""
        failed = {s.name for s in status.steps if s.state == StepState.FAILED}
        return all(s.name in failed for s in self.refused)

    def arrange(self, agents: FakeAgents, status: Callable[[], Awaitable[TaskStatus]]) -> None:
        """Set the gates on ``agents`` that make this case's order; ``status`` asks the task's."""
        arrived = {s.name: asyncio.Event() for s in self.group}
        must_complete = (
            list(self.complete_first)
            if self.complete_first is not None
            else [s.name for s in self.group if s not in self.refused and (s != self.other or self.timing == "after")]
        )

        async def refuse_in_turn(call: StepCall) -> None:
            arrived[call.step].set()
            for waited in self.refused:  # refused at once: each waits until both are at their service
                await arrived[waited.name].wait()
            if self.other is not None and self.timing != "after":
                await arrived[self.other.name].wait()
            await _until_processed(status, must_complete)

        async def held_until_cancelled(call: StepCall) -> None:
            arrived[call.step].set()
            await asyncio.get_running_loop().create_future()  # only the Scheduler's cancel ends it

        for step in self.refused:
            agents.before_call[step.agent] = refuse_in_turn
        if self.other is not None and self.timing == "before":
            agents.before_call[self.other.agent] = held_until_cancelled
        elif self.other is not None and self.timing == "during":
            agents.at_service[self.other.agent] = held_until_cancelled


def sibling_cases(definition: TaskDefinition, reached: Iterable[str]) -> list[SiblingCase]:
    """Every parallel group's cases, for the steps ``reached`` (the activity names that ran when
    nothing failed; a step skipped by its condition is not timed)."""
    ran = set(reached)
    cases: list[SiblingCase] = []
    for stage in definition.run_stages:
        if not isinstance(stage, Parallel):
            continue
        if stage.branched:
            cases += _branch_cases(definition, stage, ran)
            continue
        group = tuple(s for s in stage.steps if isinstance(s, StepDefinition) and s.agent in ran)
        for refused in group:
            for other in group:
                if other != refused:
                    cases += [SiblingCase(group, (refused,), other, timing) for timing in TIMINGS]
        for position, first in enumerate(group):
            cases += [SiblingCase(group, (first, second)) for second in group[position + 1 :]]
    return cases


def _branch_cases(definition: TaskDefinition, stage: Parallel, ran: set[str]) -> list[SiblingCase]:
    """A group with branches: the same timings, for every two of its steps that run side by side
    (neither comes after the other in a branch); what comes before each in its branch completes
    first, and nothing after the timed one starts until the refusal has come."""
    group = tuple(s for s in leaves(stage) if isinstance(s, StepDefinition) and s.agent in ran)
    before = {s.name: definition.finished_before(s.name) & {g.name for g in group} for s in group}

    def beside(a: StepDefinition, b: StepDefinition) -> bool:
        return a != b and a.name not in before[b.name] and b.name not in before[a.name]

    def first(*steps: StepDefinition) -> tuple[str, ...]:
        names = set().union(*(before[s.name] for s in steps))
        return tuple(s.name for s in group if s.name in names)

    cases: list[SiblingCase] = []
    for refused in group:
        for other in (o for o in group if beside(refused, o)):
            for timing in TIMINGS:
                settled = (*first(refused, other), other.name) if timing == "after" else first(refused)
                cases.append(SiblingCase(group, (refused,), other, timing, settled))
    for position, one in enumerate(group):
        for two in (t for t in group[position + 1 :] if beside(one, t)):
            cases.append(SiblingCase(group, (one, two), complete_first=first(one, two)))
    return cases


async def _until_processed(status: Callable[[], Awaitable[TaskStatus]], names: list[str]) -> None:
    """Until the Scheduler has seen each of ``names`` complete (the case's own bound ends it)."""
    while names:
        steps = {s.name: s.state for s in (await status()).steps}
        if all(steps[n] == StepState.PROCESSED for n in names):
            return
        await asyncio.sleep(_POLL_S)
