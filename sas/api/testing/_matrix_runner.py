"""One case of the failure matrix run and checked (``_failure_matrix.py`` chooses the cases):
the task type run with fake Agents that refuse what the case says, decided as the Supervisor's
default ladder would, and what its Agents did checked against what "undone as a whole" promises.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from collections.abc import Sequence as Ordered
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sas.api.testing._fakes import Answer, FakeAgents
from sas.api.testing._running import fake_worker, with_children
from sas.api.testing._supervising import LadderDecisions, task_and_children
from sas.task_models import Approval, OperatorRequest, StepCall, StepState, TaskResult, TaskState, TaskStatus
from sas.task_models.sdk_internals import workflow_name_of
from sas.task_types.groups import Parallel, Sequence, leaves
from sas.task_types.steps import StepDefinition, Wait
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.core.children import child_task_id
from sas.workflows.scheduler import TaskScheduler

_WHO = "failure-matrix"


@dataclass
class MatrixCase:
    """One run of the task type with one failure, and what broke the promise (nothing, if passed).

    Attributes:
        name: The failure point, e.g. ``charge refused``, ``hotel refused during flight's call``
            or ``flight's undo refused``.
        outcome: How the task ended: ``Processed``, ``Compensated``, or ``parked`` (an operator's).
        done: The forward calls that had their effect, in order (activity names).
        undone: The undos that had their effect, in order.
        cut_off: The forward calls whose attempt the Scheduler cancelled while they were at their
            service (a sibling's refusal came during them), in order.
        problems: What broke the promise; empty when the case passed.
    """

    name: str
    outcome: str = ""
    done: list[str] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    cut_off: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems


class MatrixRunner:
    """Runs the task type once per case with fresh fake Agents, drives it as the Supervisor's
    default ladder and an approver would, and checks what the run did against the promise."""

    def __init__(
        self,
        env: WorkflowEnvironment,
        workflow: type[TaskScheduler],
        definition: TaskDefinition,
        payload: dict[str, Any],
        answers: dict[str, Answer],
        timeout_s: float,
        children: Iterable[type[TaskScheduler]] = (),
    ) -> None:
        self._env, self._workflow, self._definition = env, workflow, definition
        self._payload, self._answers, self._timeout_s = payload, answers, timeout_s
        name = workflow_name_of(workflow)
        assert name is not None
        self._name = name
        self._last = FakeAgents()
        self._task_id = ""
        # The task type with the types its child steps run (and theirs), as fake_worker finds them.
        self._kinds = with_children([workflow], tuple(children))
        self.children = {k.definition.task_type: k.definition for k in self._kinds[1:]}
        # Each Agent's step, the task type's own winning over a child type's of the same name.
        self._owner: dict[str, StepDefinition] = {}
        for declared in (*self.children.values(), definition):
            for s in declared.steps:
                if isinstance(s, StepDefinition):
                    self._owner[s.agent] = s
                    if s.compensation:
                        self._owner[s.compensation] = s

    async def case(
        self,
        name: str,
        refuse: set[str],
        fix_undo: StepDefinition | None = None,
        arrange: Callable[[FakeAgents, Callable[[], Awaitable[TaskStatus]]], None] | None = None,
        decide_when: Callable[[TaskStatus], bool] | None = None,
        refuse_items: Mapping[str, str] | None = None,
        in_child: Ordered[str] = (),
    ) -> MatrixCase:
        """One run with the Agents of ``refuse`` refused for good, in the task's own calls only,
        or in those of the child task its child steps ``in_child`` lead to (a child type may call
        an Agent its parent also calls)."""
        task_id = self._task_id = f"{self._definition.task_type}-matrix-{uuid.uuid4().hex[:10]}"
        target = task_id
        for step in in_child:
            target = child_task_id(target, step)
        refused = {agent: _calls_of(target) for agent in refuse}
        agents = FakeAgents(answers=dict(self._answers), refuse_when=refused, refuse_items=dict(refuse_items or {}))
        self._last = agents
        case = MatrixCase(name)
        if arrange is not None:
            arrange(
                agents, lambda: self._env.client.get_workflow_handle(task_id).query("status", result_type=TaskStatus)
            )
        async with fake_worker(self._env, agents, *self._kinds) as queue:
            handle = await self._env.client.start_workflow(
                self._name, self._payload, id=task_id, task_queue=queue, result_type=TaskResult
            )
            try:
                async with asyncio.timeout(self._timeout_s):
                    case.outcome = await self._drive(handle, decide_when)
                    if fix_undo is not None:
                        self._fixed(case, agents, fix_undo)
                        assert fix_undo.compensation is not None
                        agents.refuse_when.pop(fix_undo.compensation, None)
                        await self._compensate_parked(handle)
                        case.outcome = await self._drive(handle)
            except TimeoutError:
                case.outcome = "still running"
                case.problems.append(f"did not end within {self._timeout_s:.0f} s ({await _where(handle)})")
        case.done = agents.done()
        case.undone = agents.undone()
        case.cut_off = [n for n, _ in agents.cut_off]
        case.problems += self._broken_promises(agents, case.outcome)
        return case

    async def _compensate_parked(self, handle: WorkflowHandle[Any, TaskResult]) -> None:
        """The operator's ``compensate`` of each undo parked (its step in Error once parked), the
        task's or a child task's: an undo Agent they share is refused in both."""
        status = await handle.query("status", result_type=TaskStatus)
        for task, _, its_status in await task_and_children(self._env, handle, self._definition, status, self.children):
            parked = [s for s in its_status.steps if s.state in (StepState.COMPENSATION_FAILED, StepState.ERROR)]
            for step in parked if its_status.needs_operator else []:
                await task.signal("compensate", OperatorRequest(step=step.name, by=_WHO, reason="fixed"))

    def item_keys(self, agent: str) -> list[str]:
        """The keys of the items the last case called ``agent`` for, sorted (a batch calls its items
        at once, so the order they were called in is not the same from run to run)."""
        return sorted({c.item_key for n, c in self._last.calls if n == agent and c.item_key and not c.compensation})

    @property
    def effects(self) -> list[tuple[str, str]]:
        """The last case's effects: (activity name, idempotency key)."""
        return list(self._last.effects)

    def _fixed(self, case: MatrixCase, agents: FakeAgents, step: StepDefinition) -> None:
        """Before the operator acts on a parked undo: only what completed after it is undone."""
        if case.outcome != "parked":
            case.problems.append(f"{step.name}'s undo kept failing, but the task ended {case.outcome}, not parked")
            return
        own_stage = self._stage(step.agent, f"{self._task_id}:{step.name}")
        undos = [(n, k.removesuffix(":undo")) for n, k in agents.effects if k.endswith(":undo")]
        early_undos = [n for n, k in undos if self._stage(n, k) < own_stage]
        if early_undos:
            case.problems.append(f"undid {early_undos} before {step.name}'s undo succeeded (not latest first)")

    async def _drive(
        self, handle: WorkflowHandle[Any, TaskResult], decide_when: Callable[[TaskStatus], bool] | None = None
    ) -> str:
        """Decide as the Supervisor's default ladder would, for the task and its child tasks (and a
        completed child's clean-up), approve every wait, skip time; the task's end, or ``parked``
        once it or a child waits for an operator. No decision is sent until ``decide_when`` holds
        of the task's status, if given."""
        ladder = LadderDecisions()
        approved: set[tuple[str, str]] = set()
        while True:
            status = await handle.query("status", result_type=TaskStatus)
            if status.state.terminal:
                return str((await handle.result()).state)
            tasks = await task_and_children(self._env, handle, self._definition, status, self.children)
            if any(its_status.needs_operator for _, _, its_status in tasks):
                return "parked"
            if decide_when is not None and not decide_when(status):
                await asyncio.sleep(0.05)
                continue
            acted = False
            waits = []
            for task, its_definition, its_status in tasks:
                for step in its_status.steps:
                    declared = its_definition.step(step.name)
                    here = (its_status.task_id, step.name)
                    if step.state == StepState.WAITING and step.wait_until is not None:
                        waits.append(step.wait_until)
                    if step.state == StepState.WAITING and isinstance(declared, Wait) and declared.signal:
                        if here not in approved:
                            approved.add(here)
                            acted = True
                            approval = Approval(step=step.name, approved=True, by=_WHO, reason="approved")
                            await task.signal(declared.signal, approval)
                        continue
                    acted = await ladder.decide(task, its_definition, its_status, step) or acted
            if waits and not acted:
                await self._env.sleep(max(min(waits) - await self._env.get_current_time(), timedelta(seconds=1)))
            else:
                await asyncio.sleep(0.05)

    def _stage(self, name: str, key: str) -> int:
        """The position of the stage of the task's step that the call under ``key`` belongs to:
        the step's own, an item's fan-out's, or a child task's step (``<task>:<step>...``); its
        parallel group's, or the step's own position."""
        prefix = f"{self._task_id}:"
        top = key.removeprefix(prefix).split(":", 1)[0] if key.startswith(prefix) else self._owner[name].name
        stage = self._definition.stage_of(top)
        return stage if stage is not None else [s.name for s in self._definition.steps].index(top)

    def _broken_promises(self, agents: FakeAgents, outcome: str) -> list[str]:
        """What the run broke of the promise: when the task ends Compensated, every step that had
        an effect is undone exactly once, latest first, and every other attempted step was proven
        to have done nothing (its key voided by the lookup that said so); no undo ever without an
        effect to undo; a step never started never has its undo called."""
        problems: list[str] = []
        forward = [(n, k) for n, k in agents.effects if not k.endswith(":undo")]
        undos = [(n, k.removesuffix(":undo")) for n, k in agents.effects if k.endswith(":undo")]
        with_undo = [(n, k) for n, k in forward if self._owner[n].compensation is not None]
        undone_keys = [k for _, k in undos]
        for name, key in with_undo:
            count = undone_keys.count(key)
            if (outcome == TaskState.COMPENSATED and count != 1) or count > 1:
                problems.append(f"{self._owner[name].name} undone {count} times")
        if outcome == TaskState.COMPENSATED:
            attempted = {(n, c.idempotency_key) for n, c in agents.calls if not c.compensation}
            for name, key in sorted(attempted):
                if (
                    self._owner[name].compensation is not None
                    and (name, key) not in forward
                    and key not in agents.voided
                ):
                    problems.append(
                        f"{self._owner[name].name} attempted, but neither undone nor found to have done nothing"
                    )
        for name, key in undos:
            if key not in {k for _, k in forward}:
                problems.append(f"{self._owner[name].name} undone with no effect to undo")
        # Latest first: by stage. Among a parallel group's members that completed, any order is
        # latest first (they completed in an order only the workflow saw); but a call cut off in
        # flight landed after them, so it is the latest work of its stage, undone before them.
        stages = [self._stage(n, k) for n, k in undos]
        if stages != sorted(stages, reverse=True):
            problems.append(f"undos not latest first: {[self._owner[n].name for n, _ in undos]}")
        problems += _branch_order(self._definition, [self._owner[n].name for n, _ in undos])
        cut = {k for _, k in agents.cut_off}
        for position, ((name, key), stage) in enumerate(zip(undos, stages, strict=True)):
            ahead = [
                self._owner[n].name
                for (n, k), s in zip(undos[:position], stages[:position], strict=True)
                if k not in cut and s == stage
            ]
            if key in cut and ahead:
                problems.append(f"{self._owner[name].name} was cut off in flight, but undone after {ahead}")
        called = {n for n, _ in agents.calls}
        for step in self._owner.values():
            if step.agent not in called and step.compensation is not None and step.compensation in called:
                problems.append(f"{step.name} was never started but its undo was called")
        return problems


def _calls_of(task_id: str) -> Callable[[StepCall], bool]:
    return lambda call: call.task_id == task_id


def _branch_order(definition: TaskDefinition, undone: list[str]) -> list[str]:
    """Latest first within each branch of a group (``Sequence``): a member's steps are undone
    before those of the members before it, whatever the other branches did meanwhile."""
    problems = []
    for branch in _branches(definition.run_stages):
        member_of = {leaf.name: i for i, member in enumerate(branch.steps) for leaf in leaves(member)}
        order = [member_of[name] for name in undone if name in member_of]
        if order != sorted(order, reverse=True):
            mine = [name for name in undone if name in member_of]
            problems.append(f"undos not latest first within the branch {' → '.join(member_of)}: {mine}")
    return problems


def _branches(members: tuple[Any, ...]) -> list[Sequence]:
    """Every branch of the task type's groups, nested ones too."""
    found: list[Sequence] = []
    for member in members:
        if isinstance(member, Sequence):
            found.append(member)
        if isinstance(member, Parallel | Sequence):
            found += _branches(member.steps)
    return found


async def _where(handle: WorkflowHandle[Any, TaskResult]) -> str:
    """Where a task that did not end was: its steps' states and its last events."""
    try:
        status = await asyncio.wait_for(handle.query("status", result_type=TaskStatus), timeout=10)
    except Exception as err:  # noqa: BLE001 - only a clue for the message
        return f"its status not read: {err}"
    steps = ", ".join(f"{s.name} {s.state} (runs {s.runs})" for s in status.steps)
    return f"{status.state}: {steps}; last events: {status.events[-5:]}"
