"""Starting a task is one function, used by every caller: a run sas starts again (rescheduled,
resubmitted alone or in bulk) and each run of a schedule is as urgent as the task it is, and no
second way of starting a task's workflow can creep into sas unseen.

The dev-server tests describe the run Temporal started and read its priority from there."""

from __future__ import annotations

import ast
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sas.api import TaskState
from sas.api.client import Selection, TaskClient
from tests.cli.test_cli import ORDER_FLAGS, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order

SAS = Path(__file__).resolve().parents[2] / "sas"

# The one function that starts a task's workflow, and the one that builds a schedule's action.
THE_START = {
    ("client/submitting.py", "start_task"): "start_workflow",
    ("client/submitting.py", "schedule_action"): "ScheduleActionStartWorkflow",
}
# Starts of workflows that are not a task's run, each with its own id rules.
NOT_A_TASK = {
    # The Supervisor: one workflow per shard, a fixed id, its own queue.
    ("supervisor/run/keeper.py", "_start"): "start_workflow",
    # A clean-up of a task closed from outside: cleanup-<id>, started once, ever.
    ("supervisor/act/outbox.py", "Outbox._start_cleanup"): "start_workflow",
    # A team's tests of its own task type: a time-skipping server and fake Agents, no deployment.
    ("api/testing/_running.py", "run_task"): "start_workflow",
    ("api/testing/_matrix_runner.py", "MatrixRunner.case"): "start_workflow",
}
STARTS = ("start_workflow", "execute_workflow", "ScheduleActionStartWorkflow")


def _start_calls() -> dict[tuple[str, str], str]:
    """Every call in sas/ (the linked workflows/, activities/, supervisor/ too) that starts a
    workflow from a client, or builds a schedule's start: (file, enclosing function) -> what."""
    found: dict[tuple[str, str], str] = {}
    for folder, _, files in os.walk(SAS, followlinks=True):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            where = path.relative_to(SAS).as_posix()
            tree = ast.parse(path.read_text(), str(path))
            for scope, call in _calls(tree, ""):
                func = call.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called in STARTS and not _not_a_client(func):
                    key = (where, scope)
                    assert key not in found, f"{where}: {scope} starts more than one workflow: {called}"
                    found[key] = called
    return found


def _calls(node: ast.AST, scope: str) -> list[tuple[str, ast.Call]]:
    out: list[tuple[str, ast.Call]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out += _calls(child, f"{scope}.{child.name}".lstrip("."))
            continue
        if isinstance(child, ast.Call):
            out.append((scope, child))
        out += _calls(child, scope)
    return out


def _not_a_client(func: ast.expr) -> bool:
    """``workflow.start_child_workflow`` and kin are a workflow's own commands, and an
    interceptor's ``super().execute_workflow`` runs a workflow: neither is a client's start."""
    if not isinstance(func, ast.Attribute):
        return False
    receiver = func.value
    if isinstance(receiver, ast.Name):
        return receiver.id == "workflow"
    return isinstance(receiver, ast.Call) and getattr(receiver.func, "id", None) == "super"


def test_a_task_is_started_in_one_place() -> None:
    found = _start_calls()
    # Found at all: a scan that finds nothing (a moved folder, a renamed call) proves nothing.
    assert set(THE_START) <= set(found), f"the one start is not where this test looks: {sorted(found)}"
    others = {key: what for key, what in found.items() if key not in THE_START and key not in NOT_A_TASK}
    assert not others, (
        "a task's run is started outside sas.client.submitting.start_task / schedule_action, where its"
        f" queue, priority, summary or id rules may differ: {others}"
    )
    assert {key: found[key] for key in THE_START} == THE_START


def _priority_key(described: Any) -> int:
    return described.raw_description.workflow_execution_info.priority.priority_key


async def _charge_failed(tasks: TaskClient, task_id: str) -> None:
    def failed(view: Any) -> bool:
        return any(s["name"] == "charge" and s["state"] == "Failed" for s in view.steps)

    await wait_until(lambda: tasks.status(task_id), failed, what=f"{task_id}: charge Failed")


async def test_a_resubmitted_task_keeps_its_priority_alone_and_in_bulk(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    tasks = TaskClient(stack.client, stack.settings, actor="priority-test")
    alone, in_bulk = fresh_id("prio-resub"), fresh_id("prio-bulk")
    urgency = {alone: 1, in_bulk: 5}
    faults = []
    for task_id in (alone, in_bulk):
        faults.append(await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id))
        await tasks.submit("order", order(), task_id=task_id, priority=urgency[task_id])
    for task_id in (alone, in_bulk):
        await _charge_failed(tasks, task_id)
        await tasks.compensate(task_id, reason="card refused")
        assert (await tasks.wait(task_id)).state == TaskState.COMPENSATED
    for fault in faults:
        await stack.remove_fault(fault)

    first = {t: (await stack.client.get_workflow_handle(t).describe()).run_id for t in (alone, in_bulk)}
    assert (await tasks.resubmit(alone, reason="card works now")).incarnation == 2
    done = await tasks.bulk("resubmit", Selection(limit=10, task_states=("Compensated",)), reason="cards work now")
    assert [(r.task_id, r.outcome) for r in done.results] == [(in_bulk, "ok")]

    for task_id, key in urgency.items():
        described = await stack.client.get_workflow_handle(task_id).describe()
        assert described.run_id != first[task_id]  # the new incarnation's run
        assert _priority_key(described) == key, f"{task_id}: incarnation 2 started at another priority"
        assert (await tasks.wait(task_id)).state == TaskState.PROCESSED


async def test_a_rescheduled_task_keeps_its_priority(stack: Stack) -> None:
    tasks = TaskClient(stack.client, stack.settings, actor="priority-test")
    task_id = fresh_id("prio-resched")
    await tasks.submit("order", order(), task_id=task_id, delay=timedelta(hours=1), priority=1)
    before = await stack.client.get_workflow_handle(task_id).describe()
    assert _priority_key(before) == 1

    moved = await tasks.reschedule(task_id, timedelta(hours=2), reason="customer asked")
    after = await stack.client.get_workflow_handle(task_id).describe()
    assert after.run_id == moved.data["run_id"] != before.run_id
    assert _priority_key(after) == 1, "the rescheduled run was started at another priority"
    assert (await after.static_summary() or "").startswith("starts ")  # still said to be delayed
    await stack.client.get_workflow_handle(task_id).terminate("test over")


async def test_each_run_of_a_schedule_has_its_priority_and_summary(stack: Stack) -> None:
    schedule_id = fresh_id("prio-sched")
    made = await sas(stack, "schedule", "create", schedule_id, "--every", "1d", "--priority", "1", *ORDER_FLAGS)
    assert made.returncode == 0, made.stderr
    schedule = stack.client.get_schedule_handle(schedule_id)
    try:
        await schedule.trigger()  # a run now, not in a day

        async def run_ids() -> list[str]:
            return [r.action.workflow_id for r in (await schedule.describe()).info.recent_actions]  # type: ignore[attr-defined]

        [run_id] = await wait_until(run_ids, what=f"a run of schedule {schedule_id}")
        run = stack.client.get_workflow_handle(run_id)
        described = await run.describe()
        assert described.task_queue == stack.settings.temporal.task_queue
        assert _priority_key(described) == 1, "the schedule's run was started at another priority"
        assert (await described.static_summary() or "").startswith(f"order {schedule_id}-")
        assert (await tasks_result(stack, run_id)) == TaskState.PROCESSED
    finally:
        await schedule.delete()


async def tasks_result(stack: Stack, task_id: str) -> str:
    return (await TaskClient(stack.client, stack.settings).wait(task_id)).state


@pytest.mark.parametrize("flag", ["0", "6"])
def test_a_schedule_refuses_a_priority_out_of_range(flag: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sas.cli.main",
            "schedule",
            "create",
            "s-1",
            "--every",
            "1d",
            "--priority",
            flag,
            *ORDER_FLAGS,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "--priority must be 1 (most urgent) to 5" in done.stderr + done.stdout
