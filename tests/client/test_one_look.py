"""One look per operator action, and bulk as a loop over the single-task actions.

Each action asks Temporal once how the task stands (which workflow answers, its pending
activities) and works from that answer; a task whose workflow has finished is refused from it,
with no update sent. A bulk action runs the single-task function for each task, so what one
task and a selection do cannot drift apart. The calls are counted by a client interceptor on
the real dev server (no fake Temporal): the describes, updates and signals sas sends.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sqlalchemy import update
from temporalio.client import (
    Client,
    DescribeWorkflowInput,
    Interceptor,
    OutboundInterceptor,
    SignalWorkflowInput,
    StartWorkflowUpdateInput,
    WorkflowExecutionDescription,
    WorkflowUpdateHandle,
)

from sas.api import TaskState
from sas.api.client import NotApplicable, Selection, TaskClient
from sas.state_store.mirror_tables import Task
from sas.state_store.queries import audit_for
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order


class Counting(Interceptor):
    """Counts the describes, updates and signals a client sends, by kind."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Outbound(next, self.calls)


class _Outbound(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, calls: Counter[str]) -> None:
        super().__init__(next)
        self.calls = calls

    async def describe_workflow(self, input: DescribeWorkflowInput) -> WorkflowExecutionDescription:
        self.calls["describe"] += 1
        return await super().describe_workflow(input)

    async def start_workflow_update(self, input: StartWorkflowUpdateInput) -> WorkflowUpdateHandle[Any]:
        self.calls["update"] += 1
        return await super().start_workflow_update(input)

    async def signal_workflow(self, input: SignalWorkflowInput) -> None:
        self.calls["signal"] += 1
        await super().signal_workflow(input)


def counted(stack: Stack) -> tuple[TaskClient, Counter[str]]:
    """A task client whose Temporal client (the stack's connection) counts what it sends."""
    counting = Counting()
    config = stack.client.config()
    config["interceptors"] = [*config["interceptors"], counting]
    return TaskClient(Client(**config), stack.settings, actor="ops-bot"), counting.calls


async def _charge_failed(tasks: TaskClient, task_id: str, runs: int) -> None:
    def failed(view: Any) -> bool:
        charge = next((s for s in view.steps if s["name"] == "charge"), None)
        return charge is not None and charge["state"] == "Failed" and (charge["runs"] or 0) >= runs

    await wait_until(lambda: tasks.status(task_id), failed, what=f"{task_id}: charge Failed (run {runs})")


async def _failing_order(stack: Stack, tasks: TaskClient) -> tuple[str, str]:
    """An order whose card is refused every time (until its fault, the second id, is removed):
    charge Fails and waits for a decision."""
    task_id = fresh_id("look")
    fault = await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    await tasks.submit("order", order(), task_id=task_id)
    await _charge_failed(tasks, task_id, runs=1)
    return task_id, fault


async def test_each_operator_action_describes_the_task_once(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks, calls = counted(stack)
    task_id, _ = await _failing_order(stack, tasks)

    calls.clear()
    await tasks.park(task_id, step="charge", reason="card blocked")
    assert (calls["describe"], calls["signal"]) == (1, 1), calls
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == TaskState.ERROR, what="parked as Error")

    calls.clear()
    await tasks.retry(task_id, reason="card unblocked")
    assert (calls["describe"], calls["update"]) == (1, 1), calls
    await _charge_failed(tasks, task_id, runs=2)

    calls.clear()
    await tasks.compensate(task_id, reason="card refused twice")
    assert (calls["describe"], calls["update"]) == (1, 1), calls
    assert (await tasks.result(task_id)).state == TaskState.COMPENSATED

    # Finished: refused from the one look at the Scheduler (and at its clean-up, which would
    # answer for a closed task); nothing is sent.
    calls.clear()
    with pytest.raises(NotApplicable, match="already finished"):
        await tasks.retry(task_id, reason="too late")
    assert (calls["describe"], calls["update"]) == (2, 0), calls
    calls.clear()
    with pytest.raises(NotApplicable, match="already finished"):
        await tasks.compensate(task_id, reason="too late")
    assert (calls["describe"], calls["update"]) == (2, 0), calls


async def test_resubmit_refuses_a_task_processed_in_temporal_whatever_the_mirror_says(
    stack_no_supervisor: Stack,
) -> None:
    """The mirror follows Temporal: a Processed order whose row drifted to Compensated (a lost
    write) is done and stays done, for one task as for a bulk resubmit; nothing new starts."""
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="ops-bot")
    task_id = (await tasks.submit("order", order())).task_id
    assert (await tasks.result(task_id)).state == TaskState.PROCESSED
    first = await stack.client.get_workflow_handle(task_id).describe()
    async with stack.sessions() as session, session.begin():
        await session.execute(update(Task).where(Task.task_id == task_id).values(state="Compensated"))

    with pytest.raises(NotApplicable, match="Processed in Temporal") as refused:
        await tasks.resubmit(task_id, reason="run it again")
    assert refused.value.hint is not None and "sas reconcile" in refused.value.hint
    done = await tasks.bulk("resubmit", Selection(limit=10, task_states=("Compensated",)), reason="again")
    assert [(r.task_id, r.outcome) for r in done.results] == [(task_id, "skipped")]
    assert "Processed in Temporal" in done.results[0].reason

    assert (await stack.client.get_workflow_handle(task_id).describe()).run_id == first.run_id
    async with stack.sessions() as session:
        assert [e.action for e in await audit_for(session, task_id)] == []


async def test_a_bulk_action_answers_for_each_task_as_the_single_task_action_does(stack_no_supervisor: Stack) -> None:
    """Each bulk result is what the one-task function said: its message when it acted, a
    finished workflow as ``skipped`` with how it ended; one describe per running task."""
    stack = stack_no_supervisor
    tasks, calls = counted(stack)
    undone = [await _failing_order(stack, tasks) for _ in range(2)]
    for task_id, fault in undone:
        await tasks.compensate(task_id, reason="card refused")
        assert (await tasks.result(task_id)).state == TaskState.COMPENSATED
        await stack.remove_fault(fault)  # the card works now: run again, the order completes
    waiting, _ = await _failing_order(stack, tasks)

    calls.clear()
    retried = await tasks.bulk("retry", Selection(limit=10, task_states=("Failed",)), reason="once more")
    assert [(r.task_id, r.outcome) for r in retried.results] == [(waiting, "ok")]
    assert (calls["describe"], calls["update"]) == (1, 1), calls
    await _charge_failed(tasks, waiting, runs=2)

    # Resubmitted, each as `sas resubmit ID` does it and says it.
    again = await tasks.bulk("resubmit", Selection(limit=10, task_states=("Compensated",)), reason="card fixed")
    by_task = {r.task_id: r for r in again.results}
    assert set(by_task) == {task_id for task_id, _ in undone}
    for task_id, _ in undone:
        assert (by_task[task_id].outcome, by_task[task_id].reason) == (
            "ok",
            "resubmitted as incarnation 2, with new idempotency keys",
        )
        assert (await tasks.wait(task_id)).state == TaskState.PROCESSED
        record = await stack.record(task_id)
        assert record is not None and record.task.incarnation == 2

    # Closed from outside: skipped with how Temporal says it ended, nothing sent.
    await stack.client.get_workflow_handle(waiting).terminate("closed from the UI")
    calls.clear()
    gone = await tasks.bulk("compensate", Selection(limit=10, task_states=("Failed",)), reason="undo it")
    [result] = gone.results
    assert (result.task_id, result.outcome) == (waiting, "skipped")
    assert result.reason.startswith("finished in Temporal (terminated at ") and result.reason.endswith(
        ": not compensated"
    )
    assert (calls["describe"], calls["update"]) == (2, 0), calls
