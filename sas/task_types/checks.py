"""The rules a task definition must keep before it runs, each checked when the worker or ``sas``
loads the type (``sas/task_types/discovery.py``), so a definition that cannot be undone as it
says is refused before any task of it starts:

- every step with an effect has an undo, or says why not: ``read_only=True`` (it changes
  nothing), ``irreversible="why"``, or it comes at or after the task type's pivot (forward
  only); a step declares one of these, not two;
- the pivot names a step of its own stage (not a wait, not in a parallel group), and no wait
  for a signal follows it (its rejection would undo the task past the point of no return);
- every complete-by is within its bounds (``StepPolicyValues``: over 0, at most a day);
- a parallel group holds two or more steps, none of them a group;
- a wait's signal is not one of the task workflow's own signals, updates or queries;
- a fan-out (``ForEach``) is a stage of its own, not the pivot, and its bounds are within theirs.

:func:`definition_problem` answers the first rule broken, as ``step 'x': what is wrong``; the
caller prefixes the module and the task type.
"""

from __future__ import annotations

from pydantic import ValidationError

from sas.task_models import StepPolicyValues
from sas.task_types.definitions import ForEach, Parallel, StepDefinition, TaskDefinition, Wait

# The task workflow's own handlers (workflows/shell/host.py): a wait's signal <name> and its
# update request_<name> of one of these names would replace the operator protocol's.
RESERVED_HANDLERS = ("retry", "compensate", "park", "status")
"""Names a wait step's signal may not take: the task workflow's own signals and query (and,
through ``request_<name>``, its updates)."""
MAX_IRREVERSIBLE = 200


def definition_problem(definition: TaskDefinition) -> str | None:
    """The first rule ``definition`` breaks, in one line naming the step; None if it keeps them all."""
    for check in (_stages_problem, _pivot_problem, _fan_out_problem):
        problem = check(definition)
        if problem:
            return problem
    for step in definition.steps:
        problem = _wait_problem(step) if isinstance(step, Wait) else _step_problem(definition, step)
        if problem:
            return problem
    return None


def _stages_problem(definition: TaskDefinition) -> str | None:
    for stage in definition.stages:
        if isinstance(stage, Parallel):
            if len(stage.steps) < 2:
                return f"a parallel group of {len(stage.steps)} step(s): give it two or more"
            nested = next((s for s in stage.steps if not isinstance(s, StepDefinition | Wait)), None)
            if nested is not None:
                return f"a parallel group holds {type(nested).__name__}: only steps and waits"
        elif not isinstance(stage, StepDefinition | Wait):
            return f"stage {stage!r} is not a step, a wait or a parallel group"
    return None


def _pivot_problem(definition: TaskDefinition) -> str | None:
    pivot = definition.pivot
    if pivot is None:
        return None
    if pivot not in {s.name for s in definition.steps}:
        return f"pivot {pivot!r} is not one of its steps ({', '.join(s.name for s in definition.steps)})"
    step = definition.step(pivot)
    if isinstance(step, Wait):
        return f"step {pivot!r}: a wait cannot be the pivot (it has no effect); name the step that commits"
    if definition.stage_of(pivot) is not None:
        return (
            f"step {pivot!r}: the pivot is in a parallel group; give it a stage of its own, so that what"
            " comes before it and what after is clear"
        )
    for later in definition.steps:
        if isinstance(later, Wait) and later.signal is not None and definition.pivot_role(later.name):
            return (
                f"step {later.name!r}: a wait for a signal after the pivot {pivot!r} could be rejected, and a"
                " rejection undoes the task past its point of no return; wait for a time, or move it before the pivot"
            )
    return None


def _step_problem(definition: TaskDefinition, step: StepDefinition) -> str | None:
    where = f"step {step.name!r}"
    if step.irreversible is not None:
        reason = step.irreversible.strip()
        if not reason or len(step.irreversible) > MAX_IRREVERSIBLE:
            return f"{where}: irreversible=...: say in 1-{MAX_IRREVERSIBLE} characters why it cannot be undone"
    declared = [
        name
        for name, given in (
            ("an undo", step.undo is not None),
            ("read_only=True", step.read_only),
            ("irreversible=...", step.irreversible is not None),
        )
        if given
    ]
    if len(declared) > 1:
        return f"{where}: declares {' and '.join(declared)}; a step has one of them"
    if not declared and definition.pivot_role(step.name) is None:
        return (
            f"{where}: has no undo; give it one, or declare read_only=True (it changes nothing),"
            " irreversible='why', or make it forward only (at or after the task type's pivot)"
        )
    if step.policy is not None:
        try:
            StepPolicyValues.model_validate(step.policy.model_dump())
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            return f"{where}: policy {field}: {first['msg']}"
    return None


def _wait_problem(step: Wait) -> str | None:
    if step.signal in RESERVED_HANDLERS:
        return (
            f"step {step.name!r}: the wait's signal {step.signal!r} is one of the task workflow's own"
            f" ({', '.join(RESERVED_HANDLERS)}, and request_<name>); give it another name"
        )
    return None


MAX_FAN_OUT_CONCURRENCY = 1000
MAX_FAN_OUT_BATCH = 500


def _fan_out_problem(definition: TaskDefinition) -> str | None:
    for stage in definition.stages:
        inner = stage.steps if isinstance(stage, Parallel) else ()
        nested = next((s for s in inner if isinstance(s, ForEach)), None)
        if nested is not None:
            return f"step {nested.name!r}: a fan-out cannot be in a parallel group; give it a stage of its own"
    for step in definition.steps:
        if not isinstance(step, ForEach):
            continue
        where = f"step {step.name!r}"
        if step.name == definition.pivot:
            return f"{where}: a fan-out cannot be the pivot (some of its items may fail and be undone)"
        if not 1 <= step.max_concurrency <= MAX_FAN_OUT_CONCURRENCY:
            return f"{where}: max_concurrency {step.max_concurrency}: 1 to {MAX_FAN_OUT_CONCURRENCY}"
        if not 1 <= step.batch_size <= MAX_FAN_OUT_BATCH:
            return (
                f"{where}: batch_size {step.batch_size}: 1 to {MAX_FAN_OUT_BATCH} (each batch is one child's history)"
            )
    return None
