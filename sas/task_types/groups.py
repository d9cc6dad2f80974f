"""What runs beside what: a parallel group (``Parallel``) and its branches (``Sequence``), and the
steps a stage, a group or a branch holds (``leaves``)."""

from __future__ import annotations

from dataclasses import dataclass

from sas.task_types.steps import ChildTask, StepDefinition, Wait


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


# What a stage, a group or a branch holds (a child step only ever a stage of its own).
Member = StepDefinition | Wait | ChildTask | Sequence | Parallel


def leaves(member: Member) -> tuple[StepDefinition | Wait | ChildTask, ...]:
    """The steps, waits and child steps of a stage, a group or a branch, in declaration order."""
    if isinstance(member, Parallel | Sequence):
        return tuple(step for inner in member.steps for step in leaves(inner))
    return (member,)
