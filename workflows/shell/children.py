"""Child steps (``ChildTask``): a step that runs another registered task type as a Temporal
child workflow, a task of its own, and its undo. The rules are in ``workflows/core/children.py``.

Forward: the child is started with the id ``<parent id>:<step>`` on the parent's workflow
queue, with the parent's link in its memo (it records it at accept: ``sas show`` links them
both ways). While it runs the parent's step is Waiting - the child has its own Supervisor
ladder; the parent's would only duplicate it - with a note naming the child. Its parent-close
policy is REQUEST_CANCEL: a parent closed from outside (terminated, timed out) asks the child
to undo itself, as a cancelled sas task does, rather than killing it mid-saga (TERMINATE) or
leaving it to finish a task nobody will complete (ABANDON).

Undo: a child still running is cancelled and waited for (it undoes itself, or, if it completed
first, is undone as below). A child that completed is undone by ``CleanupWorkflow``, started as
a child of the undoing workflow with the parent named in its input; ``cleanup.plan`` lets it
undo a Processed task only when Temporal shows it started by that very parent, the parent is
compensating and the child's recorded link names that parent and step
(``activities/cleanup_plans.py``; docs/security.md). A child that undid itself, or whose
workflow ended without a result (then the Supervisor cleans it up as a task closed from
outside), leaves nothing for the parent to undo.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from sas.task_models import OperatorRequest, StepState, TaskResult, TaskState
    from sas.workflows.core.children import PARENT_MEMO, child_task_id, outcome_of, waiting_note
    from sas.workflows.core.machine import DECISION_STATES
    from sas.workflows.definitions import ChildTask, StepContext
    from sas.task_models.text import MAX_ERROR_TEXT, bounded
    from sas.workflows.shell.host import TaskHost

CLEANUP_WORKFLOW = "CleanupWorkflow"


def _said(err: BaseException) -> str:
    return bounded(f"{type(err).__name__}: {err}", MAX_ERROR_TEXT)


class ChildSteps(TaskHost):
    """The forward run and the undo of a child step, for the Scheduler and the clean-up."""

    def __init__(self) -> None:
        super().__init__()
        # Each child step's child workflow, and how each child ended: its final task state, or
        # None when its workflow ended without a result.
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self._child_ends: dict[str, TaskState | None] = {}

    def _child_id(self, name: str) -> str:
        return child_task_id(self._core.status.task_id, name, self._notifier.incarnation)

    async def _run_child(self, name: str, child: ChildTask) -> None:
        core = self._core
        if core.step(name).state in DECISION_STATES:  # resumed after a refused cancellation
            if await self._await_decision(name, compensating=False) == "compensate":
                return
        while not core.compensating:
            ended = await self._child_attempt(name, child)
            if ended is None or core.compensating:
                return
            outcome = outcome_of(self._child_id(name), ended[0], ended[1])
            if outcome.kind == "done":
                await self._child_done(name, ended[2])
                return
            await self._child_failed(name, outcome.message, outcome.error_type, outcome.permanent)
            if await self._await_decision(name, compensating=False) == "compensate":
                return

    async def _child_attempt(
        self, name: str, child: ChildTask
    ) -> tuple[TaskState | None, str, dict[str, Any]] | None:
        """Start the child and wait for its end: (its final state, how it ended otherwise, its
        result's steps); None if the parent began undoing before the child could start."""
        core, records = self._core, self._records
        child_id = self._child_id(name)
        records.advance()
        step = core.start(name, StepState.WAITING)
        step.note = waiting_note(child_id, child.task_type)
        self._publish()
        self._event(f"{name}: {step.note}")
        await records.mirror([records.transition(step, task_state=core.status.state, note=step.note)])
        if core.compensating:
            return None
        try:
            given = dict(child.input(StepContext(input=self._payload, results=self._results)))
        except Exception as err:  # noqa: BLE001 - a team's function: its failure is the step's, said plainly
            return None, f"its input could not be made: {_said(err)}", {}
        handle = await workflow.start_child_workflow(
            child.workflow_type,
            given,
            id=child_id,
            task_queue=workflow.info().task_queue,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            memo={PARENT_MEMO: {"task_id": core.status.task_id, "step": name}},
            static_summary=f"{name}: child task {child.task_type} of {core.status.task_id}",
        )
        self._children[name] = handle
        self._inflight[name] = handle  # type: ignore[assignment] # cancelled with the others on compensate
        try:
            return await self._child_end(name, handle)
        except asyncio.CancelledError:
            # The parent's workflow is cancelled (undo it): the child is undone with the others.
            raise
        finally:
            self._inflight.pop(name, None)

    async def _child_end(
        self, name: str, handle: workflow.ChildWorkflowHandle[Any, Any]
    ) -> tuple[TaskState | None, str, dict[str, Any]]:
        """Wait for the child to end, through the parent's own cancellation (the undo decides)."""
        try:
            raw = await asyncio.shield(handle)
        except ChildWorkflowError as err:
            self._child_ends[name] = None
            return None, _said(err.cause or err), {}
        result = TaskResult.model_validate(raw) if not isinstance(raw, TaskResult) else raw
        self._child_ends[name] = result.state
        return result.state, "", {s.name: s.state for s in result.steps}

    async def _child_done(self, name: str, child_steps: dict[str, Any]) -> None:
        core, records = self._core, self._records
        records.advance()
        child_id = self._child_id(name)
        step = core.step(name)
        step.note = f"child task {child_id} completed"
        step.result = {"child_task_id": child_id, "state": str(TaskState.PROCESSED)}
        self._results[name] = dict(step.result)
        task_state = core.done(name)
        self._publish()
        self._event(f"{name}: {step.note}")
        await records.mirror(
            [records.transition(step, task_state=task_state, note=step.note, result=dict(step.result))]
        )
        self._notify("step_completed", name)

    async def _child_failed(self, name: str, message: str, error_type: str, permanent: bool) -> None:
        records = self._records
        records.advance()
        step, task_state = self._core.record_failure(name, StepState.FAILED, message, error_type, permanent)
        self._publish()
        self._event(f"{name}: {StepState.FAILED} ({error_type}): {message}")
        self._notify("failed", name, f"{error_type}: {message}")
        await records.mirror([records.transition(step, task_state=task_state, complete_by=workflow.now())])
        await self._wake_supervisor()

    # ------------------------------------------------------------------ undo

    async def _undo_child(self, name: str) -> bool:
        """Undo a child step; False if there was nothing of the child left to undo."""
        handle = self._children.get(name)
        if handle is not None and not handle.done():
            self._event(f"{name}: cancelling child task {handle.id}: it undoes itself")
            handle.cancel()
            await self._child_end(name, handle)
        # Unknown (a clean-up's plan; a child never started): its clean-up finds out, and undoes
        # only what the state store shows done.
        ended = self._child_ends.get(name, TaskState.PROCESSED)
        if ended != TaskState.PROCESSED:
            undid = ended == TaskState.COMPENSATED
            note = "the child undid itself" if undid else "the child's workflow ended without a result"
            self._set(name, StepState.COMPENSATED).note = f"nothing to undo: {note}"
            return False
        await self._clean_up_child(name)
        return True

    async def _clean_up_child(self, name: str) -> None:
        """Undo a completed child through its clean-up, authorised by this task's link to it."""
        core, records = self._core, self._records
        child_id = self._child_id(name)
        while True:
            records.advance()
            step = self._set(name, StepState.COMPENSATING, TaskState.COMPENSATING)
            step.note = f"undoing child task {child_id} (cleanup-{child_id})"
            await records.mirror([records.transition(step, task_state=TaskState.COMPENSATING, note=step.note)])
            try:
                await workflow.execute_child_workflow(
                    CLEANUP_WORKFLOW,
                    {
                        "task_id": child_id,
                        "task_type": "",
                        "payload": {},
                        "steps": [],
                        "reason": f"undone by its parent {core.status.task_id} (step {name})",
                        "parent_task_id": core.status.task_id,
                        "parent_step": name,
                    },
                    id=f"cleanup-{child_id}",
                    task_queue=workflow.info().task_queue,
                    # An undo under way is finished even if this workflow is closed meanwhile.
                    parent_close_policy=ParentClosePolicy.ABANDON,
                    static_summary=f"undo child task {child_id} of {core.status.task_id}",
                )
            except ChildWorkflowError as err:
                why = _said(err.cause or err)
                await self._child_undo_failed(name, f"the clean-up of child task {child_id} failed: {why}")
                await self._await_decision(name, compensating=True)
                continue
            records.advance()
            step = self._set(name, StepState.COMPENSATED)
            step.note = f"child task {child_id} undone by cleanup-{child_id}"
            await records.mirror([records.transition(step, task_state=TaskState.COMPENSATING, note=step.note)])
            await records.audit(
                "undo child",
                name,
                OperatorRequest(by="sas", reason=f"undoing {core.status.task_id}"),
                f"child task {child_id} (Processed) undone by cleanup-{child_id}",
            )
            return

    async def _child_undo_failed(self, name: str, message: str) -> None:
        records = self._records
        records.advance()
        step, task_state = self._core.record_failure(
            name, StepState.COMPENSATION_FAILED, message, "ChildCleanupFailed", False
        )
        self._publish()
        self._event(f"{name}: {StepState.COMPENSATION_FAILED}: {message}")
        await records.mirror([records.transition(step, task_state=task_state, complete_by=workflow.now())])
        await self._wake_supervisor()
