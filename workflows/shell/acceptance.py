"""A task's start: its input validated in the workflow, and the task accepted by the state store,
whose plan (each step's Agent, queue and policy, what the namespace has) the run keeps.

A run started with the id of a task that already exists (a reused id) is refused here: it
undoes nothing and ends at once, with ``TaskIdReused``. A run started directly (``temporal
workflow start``) with an id of a shape sas keeps for its own (``sas.task_models.ids``:
``cleanup-<task>``, ``<task>:<step>``...) fails at once, non-retryably, with ``InvalidInput``,
unless it is what sas derived that id for: the child a parent's step starts, a schedule's run.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue, SearchAttributeKey
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from sas.task_models import (
        RESUBMIT_MEMO,
        ParentLink,
        PivotRole,
        Resubmission,
        StepStatus,
        TaskAccepted,
        TaskPlan,
        TaskState,
        TaskStatus,
        validate_task_id,
    )
    from sas.task_models.activity_defs import MirrorDefs
    from sas.task_models.ids import reserved_shape, scheduled_run_of, validate_new_task_id
    from sas.workflows.core.children import PARENT_MEMO, child_task_id
    from sas.workflows.core.machine import PlanStep, TaskCore
    from sas.workflows.core.redrive import redrive_refused
    from sas.workflows.definitions import StepDefinition, TaskDefinition, Wait
    from sas.workflows.inputs import (
        INVALID_INPUT,
        STRICT_JSON_PAYLOADS,
        decode,
        given_fields,
        json_problem_text,
        json_problems,
        short,
    )
    from sas.workflows.shell.records import _MIRROR_RETRY, _MIRROR_TIMEOUT
    from sas.workflows.shell.task_run import TaskRun

# A run started with the id of a task that already exists (a reused id): it undoes nothing and ends at once.
TASK_ID_REUSED = "TaskIdReused"
# Runs recorded before a reserved id was refused went on with it, and replay that way.
RESERVED_TASK_IDS = "refuse-reserved-task-ids"
# A redrive's kept steps are taken as done; runs recorded before redrives had none to take.
REDRIVE_KEEPS_STEPS = "redrive-keeps-steps"
# Temporal's search attribute on each run a schedule starts: the schedule's id.
_SCHEDULED_BY = SearchAttributeKey.for_keyword("TemporalScheduledById")


def core_for(
    definition: TaskDefinition, task_id: str, steps: list[tuple[str, int | None, PivotRole | None]]
) -> TaskCore:
    """The core over ``steps``: (name, stage, pivot role), as the accepted plan recorded them
    (a plan accepted before pivots existed records none, so it replays as it ran)."""
    plan = []
    for position, (name, _, pivot) in enumerate(steps):
        step = definition.step(name)
        stage = definition.stage_of(name)
        is_wait = isinstance(step, Wait)
        plan.append(
            PlanStep(
                name,
                position,
                position if stage is None else stage,
                undo=isinstance(step, StepDefinition) and step.undo is not None,
                wait=is_wait,
                signal=step.signal if isinstance(step, Wait) else None,
                pivot=pivot,
                skippable=isinstance(step, StepDefinition) and step.skippable,
            )
        )
    status = TaskStatus(
        task_id=task_id,
        task_type=definition.task_type,
        state=TaskState.PENDING,
        steps=[StepStatus(name=p.name, position=p.position, stage=s) for p, (_, s, _) in zip(plan, steps, strict=True)],
    )
    return TaskCore(status, plan)


def validated_input(definition: TaskDefinition, raw_input: RawValue | Any) -> tuple[dict[str, Any], frozenset[str]]:
    """The task's input, and the fields of it its submitter set; or a non-retryable InvalidInput
    failure saying what is wrong with it.

    Decoded here, from the raw payload, rather than by the SDK before the workflow runs: a
    payload that does not decode (too deeply nested, not JSON) would otherwise fail every
    workflow task, leaving the workflow Running for ever with nothing to say why."""
    task_type = definition.task_type
    try:
        task_id = validate_task_id(workflow.info().workflow_id)
        # Asked only of a reserved id, so any other run's history is as it was.
        if reserved_shape(task_id) and not _derived_by_sas(task_id) and workflow.patched(RESERVED_TASK_IDS):
            validate_new_task_id(task_id)
        if isinstance(raw_input, RawValue):
            raw_input = decode(raw_input)
        if not isinstance(raw_input, dict):
            raise ValueError(f"input must be a JSON object, got {type(raw_input).__name__}")
        model = definition.input_model.model_validate(raw_input)
        # The model may read a text as a number ("NaN" as a float): what it makes of the input is
        # held to standard JSON too, asked behind the same patch only when it is not.
        problems = json_problems(model.model_dump(mode="json"))
        if problems and workflow.patched(STRICT_JSON_PAYLOADS):
            raise ValueError(json_problem_text(problems))
    except ValidationError as err:
        raise ApplicationError(
            f"invalid {task_type} input: {short(err)}", type=INVALID_INPUT, non_retryable=True
        ) from None
    except ValueError as err:
        raise ApplicationError(f"invalid {task_type} input: {err}", type=INVALID_INPUT, non_retryable=True) from None
    return model.model_dump(mode="json"), given_fields(model)


def _derived_by_sas(task_id: str) -> bool:
    """Whether the run's reserved id is the one sas derived for it: the id of the child its
    parent's step starts (Temporal names the parent; a client cannot make itself one), or a
    scheduled run's (that attribute can be set by any client, but the id it then allows is
    only a run's of a valid schedule id: never a clean-up's, a child's or a batch's)."""
    link = _parent()
    if link is not None:
        _, dot, incarnation = task_id.rpartition(".")
        given = int(incarnation) if dot and incarnation.isdecimal() else 1
        if task_id == child_task_id(link.task_id, link.step, given):
            return True
    schedule = workflow.info().typed_search_attributes.get(_SCHEDULED_BY)
    return schedule is not None and scheduled_run_of(task_id) == schedule


def _parent() -> ParentLink | None:
    """The step of the task that started this one as its child: from the memo the parent gave,
    believed only when Temporal says that task's workflow is this one's parent."""
    parent = workflow.info().parent
    if parent is None:
        return None
    link = workflow.memo_value(PARENT_MEMO, default=None, type_hint=ParentLink)
    return link if link is not None and link.task_id == parent.workflow_id else None


async def accept(definition: TaskDefinition, run: TaskRun, task_input: dict[str, Any]) -> TaskPlan:
    """Have the state store accept the task, and take its plan: the run's core is built again
    over the steps the plan recorded, keeping what happened before (a compensate, events)."""
    info = workflow.info()
    declared = definition.step_plans(info.workflow_id)
    resubmission = workflow.memo_value(RESUBMIT_MEMO, default=None, type_hint=Resubmission)
    if resubmission is not None and resubmission.from_step is not None:
        refused = redrive_refused(definition, resubmission.from_step)
        if refused is not None:
            # Checked before the accept: the finished incarnation's rows stay as they are.
            raise ApplicationError(f"cannot redrive: {refused}", type=TASK_ID_REUSED, non_retryable=True)
    plan = await workflow.execute_local_activity_method(
        MirrorDefs.accept,
        TaskAccepted(
            task_id=info.workflow_id,
            task_type=definition.task_type,
            workflow_type=info.workflow_type,
            task_queue=info.task_queue,
            payload=task_input,
            steps=declared,
            accepted_at=workflow.now(),
            run_id=info.run_id,
            chain_id=info.first_execution_run_id,
            resubmission=resubmission,
            parent=_parent(),
        ),
        start_to_close_timeout=_MIRROR_TIMEOUT,
        retry_policy=_MIRROR_RETRY,
        summary="accept the task: write its rows to the state store",
    )
    if plan.refused is not None:
        # The id belongs to another task: touch nothing of it (no rows, no keys, no callbacks).
        raise ApplicationError(plan.refused, type=TASK_ID_REUSED, non_retryable=True)
    steps = plan.completed(declared)  # a compact plan holds only what the accept decided
    before = run.core
    run.core = core_for(definition, info.workflow_id, [(p.name, p.stage, p.pivot) for p in steps])
    run.core.accepted = True
    run.core.compensation = before.compensation  # a compensate that came before the accept
    run.core.status.events = before.status.events
    run.plans = {p.name: p for p in steps}
    run.compact_calls = plan.steps is None
    if plan.kept and workflow.patched(REDRIVE_KEEPS_STEPS):
        for kept in plan.kept:
            # Already in the state store as kept (the accept wrote it): the run takes it as done.
            run.core.keep(kept.name, kept.state, kept.result)
            if kept.result is not None:
                run.results[kept.name] = kept.result
    run.compensation_policy = plan.compensation_policy
    run.supervisor_id = plan.supervisor_workflow_id
    run.publisher.search_attributes = plan.search_attributes
    run.publisher.progress = plan.publish_progress
    run.publisher.on = True
    url = task_input.get("callback_url")
    run.notifier.url = url if isinstance(url, str) else None
    run.notifier.incarnation = plan.incarnation
    return plan
