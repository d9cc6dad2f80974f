"""The failure matrix: a team's task type run once per failure point, with what "undone as a
whole" promises checked each time.

``check_failure_matrix(env, SignupWorkflow, {"email": "ada@example.com"})`` runs the type in
Temporal's time-skipping environment with fake Agents (``FakeAgents``, which follow the HTTP
contract as the real run does):

- nothing failing: the task ends Processed and nothing is undone;
- each step's forward call refused for good (the task's own call: a child task calling the same
  Agent is not refused): the task ends Compensated (a fan-out's every item refused: Compensated
  past its tolerance, Processed within it);
- each step of a child task refused for good (``gift: charge refused``): the child undoes
  itself, then the task is undone; a child that had completed is undone, when a later step is
  refused, by the clean-up its parent starts. Past a pivot (the child's own, or its parent's
  when the child step comes after it), parked for an operator instead;
- one item of each fan-out refused for good (the first of its keys, sorted): Processed within its tolerance,
  the refused item proven to have done nothing and the others done; past it (a tolerance of 0),
  Compensated, every item that had an effect undone;
- each sibling of a parallel group refused for good while each other sibling is before,
  during or after its call, and each two siblings refused at once (``_sibling_cases.py``): the
  task ends Compensated;
- each of the task's own steps' undo refused while a later step's refusal undoes the task: the
  undo is retried as the Supervisor's ladder does, then parked for an operator, whose
  `compensate` once the service is back ends the task Compensated (a child task's undos
  refused: its own type's matrix).

Each time it checks that every step that had an effect is undone exactly once, latest first
(by stage, and within each branch of a group by its order);
that every other attempted step was proven to have done nothing (its service's lookup said so,
which voids its key); that no step is undone that had no effect (its undo is not even sent when
the lookup says nothing was done); that a step never started is never called; and that the task
ends as its declaration promises.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from sas.api.testing._fakes import Answer
from sas.api.testing._matrix_runner import MatrixCase, MatrixRunner
from sas.api.testing._sibling_cases import sibling_cases
from sas.task_models import TaskState
from sas.task_types.fan_out import ForEach
from sas.task_types.steps import ChildTask, StepContext, StepDefinition
from sas.task_types.task_definition import TaskDefinition
from sas.workflows.scheduler import TaskScheduler


async def check_failure_matrix(
    env: WorkflowEnvironment,
    workflow: type[TaskScheduler],
    task_input: BaseModel | Mapping[str, Any],
    *,
    answers: Mapping[str, Answer] | None = None,
    children: Iterable[type[TaskScheduler]] = (),
) -> list[MatrixCase]:
    """Run ``failure_matrix`` and fail (AssertionError) naming each case that broke the promise."""
    cases = await failure_matrix(env, workflow, task_input, answers=answers, children=children)
    broken = [f"{c.name}: {'; '.join(c.problems)}" for c in cases if not c.passed]
    assert not broken, f"{workflow.definition.task_type}: " + " | ".join(broken)
    return cases


async def failure_matrix(
    env: WorkflowEnvironment,
    workflow: type[TaskScheduler],
    task_input: BaseModel | Mapping[str, Any],
    *,
    answers: Mapping[str, Answer] | None = None,
    timeout_s: float = 60,
    children: Iterable[type[TaskScheduler]] = (),
) -> list[MatrixCase]:
    """Every failure point of ``workflow``'s task type for ``task_input``, each run once.

    Args:
        env: A time-skipping environment (``time_skipping_environment()``).
        workflow: The task type's workflow (made by ``task_workflow``).
        task_input: An input its type accepts.
        answers: What each fake Agent answers (``FakeAgents.answers``): give the fields later
            steps and undos read (``Result``, ``Forward``).
        timeout_s: The most one case may take.
        children: The workflows of the task types its child steps run that are not registered
            (``run_task``'s ``children``); the registered ones are found.
    """
    definition = workflow.definition
    payload = task_input.model_dump(mode="json") if isinstance(task_input, BaseModel) else dict(task_input)
    run = MatrixRunner(env, workflow, definition, payload, dict(answers or {}), timeout_s, children)
    happy = await run.case("nothing fails", set())
    if happy.outcome != TaskState.PROCESSED:
        happy.problems.append(f"ended {happy.outcome}, not Processed")
    if happy.undone:
        happy.problems.append(f"undid {happy.undone} though nothing failed")
    cases = [happy]
    reached = set(happy.done)
    # Each fan-out's items, as the run with nothing failing called them.
    items_of = {s.agent: run.item_keys(s.agent) for s in definition.steps if isinstance(s, ForEach)}
    steps = [s for s in definition.steps if isinstance(s, StepDefinition)]
    for step in steps:
        if step.agent not in reached:
            continue  # skipped by its condition for this input: nothing to refuse
        case = await run.case(f"{step.name} refused", {step.agent})
        if _tolerated(step, payload):
            # Every item of a fan-out refused, and no more than it tolerates: the refused items
            # are undone (they did nothing) and the task goes on.
            if case.outcome != TaskState.PROCESSED:
                case.problems.append(f"ended {case.outcome}, not Processed: its items' refusals are tolerated")
        else:
            _ended_as_promised(case, _past_pivot(definition, [step]))
        cases.append(case)
    for path, below, step, past in _child_steps(definition, run.children):
        if step.agent not in reached:
            continue  # not called for this input
        case = await run.case(f"{': '.join(path)}: {step.name} refused", {step.agent}, in_child=path)
        _ended_as_promised(case, [step.name] if past or _past_pivot(below, [step]) else [])
        cases.append(case)
    for step in steps:
        if not isinstance(step, ForEach) or step.agent not in reached:
            continue
        items = items_of[step.agent]
        if not items:
            continue  # no item for this input: nothing to refuse
        case = await run.case(f"{step.name}'s item {items[0]} refused", set(), refuse_items={step.agent: items[0]})
        if step.tolerate.allowed(len(items)) >= 1:
            if case.outcome != TaskState.PROCESSED:
                case.problems.append(f"ended {case.outcome}, not Processed: one item's refusal is tolerated")
            paid = {k.rsplit(":", 1)[-1] for n, k in run.effects if n == step.agent}
            if paid != set(items[1:]):
                case.problems.append(f"items done: {sorted(paid)}, not every item but {items[0]}")
        else:
            _ended_as_promised(case, _past_pivot(definition, [step]))
        cases.append(case)
    for timing in sibling_cases(definition, reached):
        refused = {s.agent for s in timing.refused}
        case = await run.case(timing.name, refused, arrange=timing.arrange, decide_when=timing.refusals_in)
        _ended_as_promised(case, _past_pivot(definition, list(timing.refused)))
        cases.append(case)
    for step in steps:
        # A refusal that undoes the task: of a later step that may still be undone (past the
        # pivot, a refusal parks the task instead).
        later = [
            s
            for s in steps
            if definition.steps.index(s) > definition.steps.index(step)
            and s.agent in reached
            and definition.pivot_role(s.name) != "forward_only"
        ]
        if step.compensation is None or step.agent not in reached or not later:
            continue
        trigger = later[-1]
        case = await run.case(f"{step.name}'s undo refused", {trigger.agent, step.compensation}, fix_undo=step)
        if case.outcome != TaskState.COMPENSATED:
            case.problems.append(f"ended {case.outcome} after the operator's compensate, not Compensated")
        cases.append(case)
    return cases


def _tolerated(step: StepDefinition, payload: Mapping[str, Any]) -> bool:
    """Whether ``step`` is a fan-out that tolerates every one of its items failing for this input."""
    if not isinstance(step, ForEach):
        return False
    try:
        items = len(step.items(StepContext(input=payload, results={})))
    except Exception:  # noqa: BLE001 - its items read an earlier result: weighed as not tolerated
        return False
    return items <= step.tolerate.allowed(items)


def _past_pivot(definition: TaskDefinition, refused: list[StepDefinition]) -> list[str]:
    """The refused steps that come after ``definition``'s pivot (forward only)."""
    return [s.name for s in refused if definition.pivot_role(s.name) == "forward_only"]


def _child_steps(
    definition: TaskDefinition,
    children: Mapping[str, TaskDefinition],
    path: tuple[str, ...] = (),
    past: bool = False,
) -> Iterator[tuple[tuple[str, ...], TaskDefinition, StepDefinition, bool]]:
    """Each step with an Agent of the task types ``definition``'s child steps run (and theirs):
    the child steps that lead to it, its type, the step, and whether one of those child steps is
    past its own task's pivot."""
    for item in definition.steps:
        if not isinstance(item, ChildTask) or item.task_type not in children:
            continue
        below = children[item.task_type]
        here, beyond = (*path, item.name), past or definition.pivot_role(item.name) == "forward_only"
        for step in below.steps:
            if isinstance(step, StepDefinition):
                yield here, below, step, beyond
        yield from _child_steps(below, children, here, beyond)


def _ended_as_promised(case: MatrixCase, forward_only: list[str]) -> None:
    """A refusal before the pivot (or of the pivot itself) undoes the task: Compensated. One after
    it (``forward_only``) parks the task for an operator, with nothing undone: the task only goes
    forward."""
    if not forward_only:
        if case.outcome != TaskState.COMPENSATED:
            case.problems.append(f"ended {case.outcome}, not Compensated")
        return
    if case.outcome != "parked":
        case.problems.append(f"{forward_only[0]} is past the pivot, but the task ended {case.outcome}, not parked")
    if case.undone:
        case.problems.append(f"undid {case.undone} past the pivot")
