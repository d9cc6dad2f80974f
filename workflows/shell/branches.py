"""A parallel group with branches, run forward: the Scheduler walks the group as declared
(``Parallel(Sequence(flight, seat), hotel)``). A ``Sequence`` runs its members in order, each
once the one before is done; a group starts its members together and is done when all are.
Each step is run by the Scheduler's own step runner, with its condition asked when the step is
reached, so a step in a branch sees the results of the steps before it in its branch.

Once the task is compensating nothing new starts in any branch: a branch stops before its next
member, and the undo engine then undoes what was attempted, unfinished attempts first, then the
completed steps in the reverse order of their completion (``TaskCore.undo_order``), which is
latest first within each branch.

The plan records only the group's stage (every step of a branch keeps its group's stage, so
the mirror and the Supervisor see one stage); the branches come from the definition. A plain
group, whose members are all steps, is never walked here: the Scheduler runs it as it always
did, so the histories of those task types replay unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from sas.task_models import StepState
    from sas.workflows.core.machine import TaskCore
    from sas.workflows.definitions import Parallel, Sequence, StepDefinition, Wait, leaves

# Run one step (forward or wait), given the steps whose results it may use.
RunStep = Callable[[str, list[str]], Awaitable[None]]
# The given steps whose conditions hold; the others are Skipped, with the reason.
Wanted = Callable[[list[str]], Awaitable[list[str]]]

_SETTLED = (StepState.PROCESSED, StepState.SKIPPED)


class BranchRunner:
    """Runs one parallel group that has branches, from the stages before it to its end."""

    def __init__(self, core: TaskCore, run_step: RunStep, wanted: Wanted) -> None:
        self._core = core
        self._run_step = run_step
        self._wanted = wanted

    async def run(self, group: Parallel, earlier: list[str]) -> None:
        """Run ``group``; ``earlier``: the steps of the stages before it (their results are given)."""
        await self._member(group, earlier)

    async def _member(self, member: StepDefinition | Wait | Sequence | Parallel, earlier: list[str]) -> list[str]:
        """Run one member; returns ``earlier`` with the member's steps, for what follows it."""
        after = earlier + [s.name for s in leaves(member)]
        if self._core.compensating:
            return after  # nothing new starts once undoing has begun
        if isinstance(member, Parallel):
            await asyncio.gather(*(self._member(inner, earlier) for inner in member.steps))
        elif isinstance(member, Sequence):
            done = earlier
            for inner in member.steps:
                if self._core.compensating:
                    break
                done = await self._member(inner, done)
        else:
            await self._step(member.name, earlier)
        return after

    async def _step(self, name: str, earlier: list[str]) -> None:
        # Run again after a refused cancellation (past the pivot), a settled step stays as it is.
        if self._core.step(name).state in _SETTLED:
            return
        if await self._wanted([name]):
            await self._run_step(name, earlier)
