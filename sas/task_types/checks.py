"""The rules a task definition must keep before it runs, each checked when the worker or ``sas``
loads the type (``sas/task_types/discovery.py``), so a definition that cannot be undone as it
says is refused before any task of it starts:

- every step with an effect has an undo, or says why not: ``read_only=True`` (it changes
  nothing), ``irreversible="why"``, or it comes at or after the task type's pivot (forward
  only); a step declares one of these, not two;
- the pivot names a step of its own stage (not a wait, not in a parallel group), and no wait
  for a signal follows it (its rejection would undo the task past the point of no return);
- every complete-by is within its bounds (``StepPolicyValues``: over 0, at most a day);
- a ``Choice`` is a stage of its own; its options are labelled each its own way, no step of a
  path has a ``when=`` of its own (its path's condition is its condition), the pivot is in no
  path, and no step names a result of another path of its choice;
- a parallel group holds two or more members: steps, waits, branches (``Sequence``, one or
  more members, none of them a ``Sequence``) and groups; a ``Sequence`` is never a stage of
  its own;
- a wait's signal is not one of the task workflow's own signals, updates or queries;
- a fan-out (``ForEach``) is a stage of its own, before any pivot, and its bounds are within theirs;
- a declared summary is a template of the input's own fields or a function of one argument, and
  declared details a function of one argument (neither a coroutine: they run in the workflow);
- a child step (``ChildTask``) is a stage of its own, and, across the registered types
  (:func:`children_problem`), names a registered task type by its workflow, never runs its own
  type again (directly or through another), and a child with a pivot of its own - it cannot be
  undone once past it - runs at or after its parent's pivot, where nothing is undone.

:func:`definition_problem` answers the first rule broken, as ``step 'x': what is wrong``; the
caller prefixes the module and the task type.
"""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from sas.task_models import StepPolicyValues
from sas.task_types.choices import Choice
from sas.task_types.fan_out import ForEach
from sas.task_types.groups import Parallel, Sequence, leaves
from sas.task_types.steps import ChildTask, StepDefinition, Wait
from sas.task_types.task_definition import MAX_SUMMARY, TaskDefinition

# The task workflow's own handlers (workflows/shell/operator.py): a wait's signal <name> and its
# update request_<name> of one of these names would replace the operator protocol's.
RESERVED_HANDLERS = (
    "retry",
    "compensate",
    "park",
    "status",
    "complete",
    "check_complete",
    "retry_with_input",
    "check_retry_with_input",
    "skip",
    "check_skip",
)
"""Names a wait step's signal may not take: the task workflow's own signals and query (and,
through ``request_<name>``, its updates)."""
MAX_IRREVERSIBLE = 200


def definition_problem(definition: TaskDefinition) -> str | None:
    """The first rule ``definition`` breaks, in one line naming the step; None if it keeps them all."""
    for check in (_stages_problem, _pivot_problem, _story_problem, _fan_out_problem):
        problem = check(definition)
        if problem:
            return problem
    for step in definition.steps:
        if isinstance(step, ChildTask):
            continue  # checked across the registered types: children_problem
        problem = _wait_problem(step) if isinstance(step, Wait) else _step_problem(definition, step)
        if problem:
            return problem
    return None


def _stages_problem(definition: TaskDefinition) -> str | None:
    for declared in definition.stages:
        if isinstance(declared, Choice):
            problem = _choice_problem(declared)
            if problem:
                return problem
    for stage in definition.run_stages:
        if isinstance(stage, Parallel):
            problem = _group_problem(stage)
            if problem:
                return problem
        elif isinstance(stage, Sequence):
            return "a Sequence is a stage: a branch belongs in a parallel group (the stages already run in order)"
        elif not isinstance(stage, StepDefinition | Wait | ChildTask):
            return f"stage {stage!r} is not a step, a wait, a child task or a parallel group"
    return None


def _choice_problem(choice: Choice) -> str | None:
    """A choice's paths: labels of their own, and no step with a condition besides its path's."""
    labels = [label for label, _ in choice.paths]
    if len(set(labels)) != len(labels):
        return f"a Choice with two options labelled alike ({', '.join(labels)}): give each its own label"
    for label, path in choice.paths:
        if isinstance(path, Sequence):
            problem = _group_problem(path)
            if problem:
                return problem
        for step in leaves(path):
            if step.when is not None:
                return (
                    f"step {step.name!r}: a step of a Choice's path ({label}) runs when its path is chosen;"
                    " give it no when= of its own (add an Option for that case)"
                )
    return None


def _group_problem(member: Parallel | Sequence) -> str | None:
    """A group's and a branch's members, all the way down."""
    if isinstance(member, Parallel) and len(member.steps) < 2:
        return f"a parallel group of {len(member.steps)} step(s): give it two or more"
    if isinstance(member, Sequence) and not member.steps:
        return "an empty Sequence: give a branch one or more steps"
    for inner in member.steps:
        if isinstance(member, Sequence) and isinstance(inner, Sequence):
            return "a Sequence inside a Sequence: list its steps in the outer one"
        if isinstance(inner, Parallel | Sequence):
            problem = _group_problem(inner)
            if problem:
                return problem
        elif isinstance(inner, ChildTask):
            return f"step {inner.name!r}: a child task runs as a stage of its own, not in a parallel group"
        elif not isinstance(inner, StepDefinition | Wait):
            return f"a parallel group holds {type(inner).__name__}: only steps, waits, branches and groups"
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
    path = definition.choice_path(pivot)
    if path is not None:
        return (
            f"step {pivot!r}: the pivot is in a path of a Choice ({path.label}), so whether the task passed"
            " its point of no return would depend on the path; give it a stage of its own"
        )
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


def children_problem(definition: TaskDefinition, registered: Mapping[str, tuple[TaskDefinition, str]]) -> str | None:
    """The first rule a type's child steps break against the registered types (task type ->
    its definition and workflow type name), naming the step; None if they keep them all."""
    for step in definition.steps:
        if not isinstance(step, ChildTask):
            continue
        where = f"step {step.name!r}"
        found = registered.get(step.task_type)
        if found is None:
            known = ", ".join(sorted(registered)) or "none"
            return f"{where}: child task type {step.task_type!r} is not registered (the registered types: {known})"
        child, workflow_name = found
        if workflow_name != step.workflow_type:
            return (
                f"{where}: task type {step.task_type!r} runs as workflow {workflow_name!r}, not"
                f" {step.workflow_type!r}; give ChildTask(..., workflow={workflow_name!r})"
            )
        cycle = _cycle(definition.task_type, step.task_type, registered, [definition.task_type])
        if cycle:
            return f"{where}: the child tasks run in a circle ({' -> '.join(cycle)}); a task type never runs itself"
        if child.pivot is not None and definition.pivot_role(step.name) is None:
            return (
                f"{where}: child task type {step.task_type!r} has a pivot ({child.pivot!r}) and cannot be undone"
                " past it; run it at or after this type's own pivot, where nothing is undone"
            )
    return None


def _cycle(
    origin: str, task_type: str, registered: Mapping[str, tuple[TaskDefinition, str]], path: list[str]
) -> list[str] | None:
    """The path back to ``origin`` through child steps from ``task_type``, if there is one."""
    if task_type == origin:
        return [*path, task_type]
    if task_type in path or task_type not in registered:
        return None
    for step in registered[task_type][0].steps:
        if isinstance(step, ChildTask):
            found = _cycle(origin, step.task_type, registered, [*path, task_type])
            if found:
                return found
    return None


def _story_problem(definition: TaskDefinition) -> str | None:
    summary, details = definition.summary, definition.details
    if isinstance(summary, str):
        problem = _template_problem(definition, summary)
        if problem:
            return f"summary={summary!r}: {problem}"
    elif summary is not None:
        problem = _function_problem(summary, "the input (a dict of JSON values)")
        if problem:
            return f"summary=...: {problem}"
    if details is not None:
        problem = _function_problem(details, "a StepContext (the input and the results so far)")
        if problem:
            return f"details=...: {problem}"
    return None


def _template_problem(definition: TaskDefinition, template: str) -> str | None:
    if not template.strip() or len(template) > MAX_SUMMARY:
        return f"give a template of 1-{MAX_SUMMARY} characters"
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        return f"not a template ({err}); write a literal brace as {{{{ or }}}}"
    fields = definition.input_model.model_fields
    for _, name, spec, _ in parts:
        if name is None:
            continue
        # Only a field by its name: an attribute or an index ({name.__class__}, {rooms[0]}) would
        # reach into the value instead of showing it.
        if not name.isidentifier() or name not in fields:
            known = ", ".join(fields) or "none"
            return f"{{{name}}} is not a field of {definition.input_model.__name__} (its fields: {known})"
        if spec and "{" in spec:
            return f"{{{name}:{spec}}}: a format inside a format is not allowed"
    return None


def _function_problem(function: Callable[..., Any] | object, argument: str) -> str | None:
    if not callable(function):
        return f"give a template or a function, not {type(function).__name__}"
    if inspect.iscoroutinefunction(function):
        return "an async function: it runs in the workflow on every change of the task; make it a plain function"
    try:
        inspect.signature(function).bind(None)
    except TypeError:
        return f"the function must take one argument, {argument}"
    except ValueError:
        return None  # a builtin without a signature: called with one argument as well
    return None


MAX_FAN_OUT_CONCURRENCY = 1000
MAX_FAN_OUT_BATCH = 500


def _fan_out_problem(definition: TaskDefinition) -> str | None:
    for stage in definition.run_stages:
        nested = (
            next((s for s in leaves(stage) if isinstance(s, ForEach)), None) if isinstance(stage, Parallel) else None
        )
        if nested is not None:
            return f"step {nested.name!r}: a fan-out cannot be in a parallel group; give it a stage of its own"
    for step in definition.steps:
        if not isinstance(step, ForEach):
            continue
        where = f"step {step.name!r}"
        if definition.pivot_role(step.name) is not None:
            return (
                f"{where}: a fan-out cannot be the pivot or come after it (its failed items are undone,"
                " and past its tolerance the task is)"
            )
        if not 1 <= step.max_concurrency <= MAX_FAN_OUT_CONCURRENCY:
            return f"{where}: max_concurrency {step.max_concurrency}: 1 to {MAX_FAN_OUT_CONCURRENCY}"
        if not 1 <= step.batch_size <= MAX_FAN_OUT_BATCH:
            return (
                f"{where}: batch_size {step.batch_size}: 1 to {MAX_FAN_OUT_BATCH} (each batch is one child's history)"
            )
    return None
