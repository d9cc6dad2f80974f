"""The Scheduler: runs a task's declared stages through their Agents - a step, or a parallel
group whose steps start together - then undoes the attempted steps in the reverse order of
their completion when the task cannot complete.

``TaskScheduler.execute`` tells the story; each part of it is a named collaborator in
``workflows/shell/``, a plain class given what it needs:

- ``TaskRun`` (``task_run.py``): the run's state - the pure core, the records, what the UI is
  shown and the submitter told - and the outlets every change goes through;
- ``StepRunner`` (``forward.py``): the stages, forward, each step through its Agent;
- ``Waits`` (``waits.py``): the wait steps and their approvals;
- ``Children`` (``children.py``): the child steps, each a task of another type, and their undo;
- ``Decisions`` (``decisions.py``): the Supervisor's and operators' decisions about a step that
  waits, and where undoing begins;
- ``Undo`` (``undo.py``): the one undo engine, shared with the clean-up;
- ``FanOut`` (``fanout.py``): a fan-out step's items, run and undone in batch child workflows.

The rules live in the pure core (``workflows/core/``): every change of a step's state is made
in ``TaskCore.set``, and whether an operator's request applies is decided in
``workflows/core/requests.py``. The operator protocol's handlers (``retry``, ``compensate``,
``park``, their updates, ``status``) are declared once, in ``shell/operator.py``, for the
Scheduler and the clean-up.
"""

from __future__ import annotations

from typing import Any, ClassVar

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from sas.task_models import TaskResult
    from sas.workflows.definitions import TaskDefinition, Wait
    from sas.workflows.shell.acceptance import accept, core_for, validated_input
    from sas.workflows.shell.children import Children
    from sas.workflows.shell.decisions import Decisions
    from sas.workflows.shell.fanout import FanOut
    from sas.workflows.shell.forward import StepRunner
    from sas.workflows.shell.operator import OperatorHandlers
    from sas.workflows.shell.records import Records
    from sas.workflows.shell.task_run import TaskRun
    from sas.workflows.shell.undo import Undo
    from sas.workflows.shell.waits import Waits


class TaskScheduler(OperatorHandlers):
    """Base of every task workflow. Subclasses set ``definition`` and a ``@workflow.run``
    that calls :meth:`execute`."""

    definition: ClassVar[TaskDefinition]

    def __init__(self) -> None:
        info = workflow.info()
        steps = self.definition.steps
        # The task's status exists from the start (Pending, its declared steps), so no handler or
        # step has to ask whether it does; the core is built again once the state store accepts it.
        core = core_for(self.definition, info.workflow_id, [(s.name, None, None) for s in steps])
        self.task = TaskRun(core, Records(task_id=info.workflow_id, chain_id=info.first_execution_run_id))
        self.decisions = Decisions(self.task)
        self.waits = Waits(self.task, self.decisions, [s for s in steps if isinstance(s, Wait)])
        self.children = Children(self.task, self.decisions)
        self.fan_out = FanOut(self.definition, self.task, self.decisions)
        self.forward = StepRunner(self.definition, self.task, self.decisions, self.waits, self.fan_out, self.children)
        self.undo = Undo(self.task, self.decisions, self.fan_out, self.children)

    async def execute(self, raw_input: RawValue | Any) -> TaskResult:
        """The task: its input validated and accepted, its stages run forward, then completed or
        undone, and the submitter told each time."""
        task = self.task
        task_input, task.given = validated_input(self.definition, raw_input)
        task.payload = task_input  # before the accept: the first status published tells its story
        plan = await accept(self.definition, task, task_input)
        self.forward.waits_for_cancelled = plan.waits_for_cancelled_attempts
        task.notify("received")
        await self.forward.all_stages()
        if not task.core.compensating:
            await self.forward.finish()
            task.notify("completed")
        else:
            await self.undo.all_attempted()
            task.notify("compensated")
        for line in await task.notifier.delivered():
            task.event(line)
        status = task.core.status
        return TaskResult(task_id=status.task_id, state=status.state, steps=status.steps)
