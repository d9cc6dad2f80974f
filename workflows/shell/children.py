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
    from sas.task_models.ids import cleanup_workflow_id
    from sas.task_models.text import MAX_ERROR_TEXT, bounded
    from sas.workflows.core.children import PARENT_MEMO, child_task_id, outcome_of, waiting_note
    from sas.workflows.core.machine import DECISION_STATES
    from sas.workflows.definitions import ChildTask, StepContext
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.task_run import TaskRun

CLEANUP_WORKFLOW = "CleanupWorkflow"
# How a child ended: its final task state and its steps' states; or None (no result) and how.
_Ended = tuple[TaskState | None, str]


def _said(err: BaseException) -> str:
    return bounded(f"{type(err).__name__}: {err}", MAX_ERROR_TEXT)


class Children:
    """Runs a task's child steps forward, and undoes them (for the Scheduler and the clean-up)."""

    def __init__(self, run: TaskRun, decisions: Decisions) -> None:
        self.run = run
        self.decisions = decisions
        # Each child step's child workflow, and how each child ended: its final task state, or
        # None when its workflow ended without a result (or never started).
        self.handles: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self.ends: dict[str, TaskState | None] = {}

    def child_id(self, name: str) -> str:
        run = self.run
        return child_task_id(run.core.status.task_id, name, run.notifier.incarnation)

    async def step(self, name: str, child: ChildTask) -> None:
        """Run the child until it completes (the step is done), or undoing begins."""
        core = self.run.core
        # Resumed after a refused cancellation while the step waited for a decision: it still does.
        resumed = core.step(name).state in DECISION_STATES
        if resumed and await self.decisions.wait_for(name, compensating=False) == "compensate":
            return
        while not core.compensating:
            ended = await self._attempt(name, child)
            if ended is None or core.compensating:
                return
            outcome = outcome_of(self.child_id(name), *ended)
            if outcome.kind == "done":
                await self._done(name)
                return
            await self._failed(name, StepState.FAILED, outcome.message, outcome.error_type, outcome.permanent)
            if await self.decisions.wait_for(name, compensating=False) == "compensate":
                return

    async def _attempt(self, name: str, child: ChildTask) -> _Ended | None:
        """Start the child and wait for its end; None if undoing began before it could start."""
        run = self.run
        core, records = run.core, run.records
        child_id = self.child_id(name)
        records.advance()
        core.start(name, StepState.WAITING)
        step = core.set(name, note=waiting_note(child_id, child.task_type))
        run.publish()
        run.event(f"{name}: {step.note}")
        await records.mirror([records.transition(step, task_state=core.status.state, note=step.note)])
        if core.compensating:
            self.ends[name] = None
            return None
        try:
            given = dict(child.input(StepContext(input=run.payload, results=run.results)))
        except Exception as err:  # noqa: BLE001 - a team's function: its failure is the step's, said plainly
            self.ends[name] = None
            return None, f"its input could not be made: {_said(err)}"
        handle = await workflow.start_child_workflow(
            child.workflow_type,
            given,
            id=child_id,
            task_queue=workflow.info().task_queue,
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            memo={PARENT_MEMO: {"task_id": core.status.task_id, "step": name}},
            static_summary=f"{name}: child task {child.task_type} of {core.status.task_id}",
        )
        self.handles[name] = handle
        run.inflight[name] = handle  # type: ignore[assignment] # cancelled with the attempts when undoing begins
        try:
            return await self._end(name, handle)
        finally:
            run.inflight.pop(name, None)

    async def _end(self, name: str, handle: workflow.ChildWorkflowHandle[Any, Any]) -> _Ended:
        """Wait for the child to end. Shielded: the parent's own cancellation does not reach
        the child from here; undoing the step does (``undo``)."""
        try:
            raw = await asyncio.shield(handle)
        except ChildWorkflowError as err:
            self.ends[name] = None
            return None, _said(err.cause or err)
        result = raw if isinstance(raw, TaskResult) else TaskResult.model_validate(raw)
        self.ends[name] = result.state
        return result.state, ""

    async def _done(self, name: str) -> None:
        run = self.run
        core, records = run.core, run.records
        records.advance()
        child_id = self.child_id(name)
        step = core.set(
            name,
            note=f"child task {child_id} completed",
            result={"child_task_id": child_id, "state": str(TaskState.PROCESSED)},
        )
        run.results[name] = dict(step.result or {})
        task_state = core.done(name)
        run.publish()
        run.event(f"{name}: {step.note}")
        await records.mirror([records.transition(step, task_state=task_state, note=step.note, result=step.result)])
        run.notify("step_completed", name)

    async def _failed(self, name: str, state: StepState, message: str, error_type: str, permanent: bool) -> None:
        run = self.run
        records = run.records
        records.advance()
        step, task_state = run.core.record_failure(name, state, message, error_type, permanent)
        run.publish()
        run.event(f"{name}: {state} ({error_type}): {message}")
        if state == StepState.FAILED:
            run.notify("failed", name, f"{error_type}: {message}")
        await run.mirror_failure([records.transition(step, task_state=task_state, complete_by=workflow.now())])

    # ------------------------------------------------------------------ undo

    async def undo(self, name: str) -> bool:
        """Undo a child step; False if nothing of the child was left to undo."""
        run = self.run
        handle = self.handles.get(name)
        if handle is not None and not handle.done():
            run.event(f"{name}: cancelling child task {handle.id}: it undoes itself")
            handle.cancel()
            await self._end(name, handle)
        # Unknown (the clean-up of a closed parent): the child's clean-up finds out, and undoes
        # only what the state store shows done.
        ended = self.ends.get(name, TaskState.PROCESSED)
        if ended != TaskState.PROCESSED:
            undid = ended == TaskState.COMPENSATED
            why = "the child undid itself" if undid else "the child's workflow ended without a result"
            run.set(name, StepState.COMPENSATED, note=f"nothing to undo: {why}")
            return False
        await self._clean_up(name)
        return True

    async def _clean_up(self, name: str) -> None:
        """Undo a completed child through its clean-up, authorised by this task's link to it."""
        run = self.run
        core, records = run.core, run.records
        child_id = self.child_id(name)
        while True:
            records.advance()
            note = f"undoing child task {child_id} (cleanup-{child_id})"
            step = run.set(name, StepState.COMPENSATING, TaskState.COMPENSATING, note=note)
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
                    id=cleanup_workflow_id(child_id),
                    task_queue=workflow.info().task_queue,
                    # An undo under way is finished even if this workflow is closed meanwhile.
                    parent_close_policy=ParentClosePolicy.ABANDON,
                    static_summary=f"undo child task {child_id} of {core.status.task_id}",
                )
            except ChildWorkflowError as err:
                message = f"the clean-up of child task {child_id} failed: {_said(err.cause or err)}"
                await self._failed(name, StepState.COMPENSATION_FAILED, message, "ChildCleanupFailed", False)
                await self.decisions.wait_for(name, compensating=True)
                continue
            records.advance()
            step = run.set(name, StepState.COMPENSATED, note=f"child task {child_id} undone by cleanup-{child_id}")
            await records.mirror([records.transition(step, task_state=TaskState.COMPENSATING, note=step.note)])
            changed = f"child task {child_id} (Processed) undone by cleanup-{child_id}"
            await records.audit("undo child", name, OperatorRequest(by="sas", reason="its parent is undone"), changed)
            return
