"""Control of single tasks (issue 14): cancel and reschedule a delayed task, cancel a schedule,
park a hung or waiting step and resume it with ``sas retry``, the attempts kept in
``sas show``. Each test asserts where Temporal and the state store end up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest_asyncio
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from sas.state_store.queries import audit_for
from sas.task_models import StepPolicyValues, TaskResult
from sas_demo_services.launcher import ServiceProcess
from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, start_stack

_PAUSED = (
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED,
)
# Long enough for a hung call to be still running when the test parks it.
_SLOW_STEP = StepPolicyValues(
    complete_by_s=15.0, max_attempts=3, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)


@pytest_asyncio.fixture
async def slow_stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    async with start_stack(client, temporal_address, services.url, sqlite_url, default_step=_SLOW_STEP) as running:
        yield running


async def _audit(stack: Stack, task_id: str) -> list[Any]:
    async with stack.sessions() as session:
        return await audit_for(session, task_id)


async def _describe(stack: Stack, task_id: str) -> Any:
    return await stack.client.get_workflow_handle(task_id).describe()


# ------------------------------------------------------------ delayed tasks


async def test_cancel_a_delayed_task_terminates_it_before_anything_runs(stack: Stack) -> None:
    task_id = fresh_id("ctl-cancel")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "1h", "--json"))

    done = await sas(stack, "cancel", task_id, "--by", "alice", "--reason", "customer called")
    assert done.returncode == 0, done.stderr
    assert "cancelled; nothing had run" in done.stdout

    assert (await _describe(stack, task_id)).status == WorkflowExecutionStatus.TERMINATED
    assert await stack.record(task_id) is None  # it never started: no rows
    [entry] = await _audit(stack, task_id)
    assert (entry.action, entry.actor, entry.reason) == ("cancel", "alice", "customer called")
    assert "nothing had run" in entry.changed

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    assert shown["task"] is None and [a["action"] for a in shown["operator_actions"]] == ["cancel"]
    table = await sas(stack, "show", task_id)
    assert table.returncode == 0 and "never ran" in table.stdout and "alice" in table.stdout
    status = as_json(await sas(stack, "status", task_id, "--json"))
    assert status["state"] == "Cancelled" and status["reason"] == "cancelled by alice: customer called"
    said = await sas(stack, "status", task_id)
    assert said.returncode == 0 and "cancelled before it started" in said.stdout

    again = await sas(stack, "cancel", task_id)
    assert again.returncode == 1 and "already ended (terminated)" in again.stderr
    assert len(await _audit(stack, task_id)) == 1


async def test_a_claim_the_audit_log_cannot_keep_is_refused_before_anything_is_done(stack_any_db: Stack) -> None:
    """The audit entry comes before the action: a ``--by`` longer than the log keeps, or a
    reason with a control character, is refused in one line and the delayed task is untouched."""
    stack = stack_any_db
    task_id = fresh_id("ctl-claims")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "1h", "--json"))

    too_long = await sas(stack, "cancel", task_id, "--by", "a" * 201, "--reason", "why")
    assert too_long.returncode == 2
    assert too_long.stderr.strip().splitlines()[0] == "sas: --by is 201 characters long: at most 200"
    moved = await sas(stack, "reschedule", task_id, "--in", "2h", "--by", "bob", "--reason", "line\x1b[2J")
    assert moved.returncode == 2 and "--reason must not contain control characters" in moved.stderr

    assert (await _describe(stack, task_id)).status == WorkflowExecutionStatus.RUNNING
    assert await _audit(stack, task_id) == []
    # Within the bound it is done, and the entry written ahead of it says what was done.
    done = await sas(stack, "cancel", task_id, "--by", "a" * 200, "--reason", "customer called")
    assert done.returncode == 0, done.stderr
    [entry] = await _audit(stack, task_id)
    assert entry.actor == "a" * 200 and "nothing had run" in entry.changed


async def test_reschedule_moves_the_start_and_the_new_run_does_the_task(stack: Stack) -> None:
    task_id = fresh_id("ctl-resched")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "1h", "--json"))
    first = await _describe(stack, task_id)

    past = await sas(stack, "reschedule", task_id, "--at", "2020-01-01T00:00:00+00:00")
    assert past.returncode == 1 and "in the past" in past.stderr and "Traceback" not in past.stderr
    far = await sas(stack, "reschedule", task_id, "--in", "400d")
    assert far.returncode == 1 and "more than 366 days ahead" in far.stderr
    neither = await sas(stack, "reschedule", task_id)
    assert neither.returncode == 1 and "--at" in neither.stderr
    assert (await _describe(stack, task_id)).run_id == first.run_id  # refused: nothing touched

    moved = as_json(await sas(stack, "reschedule", task_id, "--in", "2h", "--by", "bob", "--json"))
    now = await _describe(stack, task_id)
    assert now.run_id == moved["run_id"] != first.run_id
    assert now.status == WorkflowExecutionStatus.RUNNING
    assert now.execution_time is not None
    assert timedelta(minutes=115) < now.execution_time - datetime.now(UTC) < timedelta(minutes=121)
    old = await stack.client.get_workflow_handle(task_id, run_id=first.run_id).describe()
    assert old.status == WorkflowExecutionStatus.TERMINATED
    shown = as_json(await sas(stack, "status", task_id, "--json"))
    assert shown["state"] == "Scheduled" and datetime.fromisoformat(shown["scheduled_for"]) == now.execution_time

    # Brought forward to a few seconds from now, the same task (same input) runs to the end.
    as_json(await sas(stack, "reschedule", task_id, "--in", "6s", "--json"))
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == "Processed"
    assert await stack.task_state(task_id) == "Processed"
    assert sorted(e["action"] for e in await stack.ledger(task_id)) == ["charge", "reserve", "ship"]
    actions = [(e.action, e.actor) for e in await _audit(stack, task_id)]
    assert actions.count(("reschedule", "bob")) == 1 and len(actions) == 2

    late = await sas(stack, "reschedule", task_id, "--in", "1h")
    assert late.returncode == 1 and "already ended" in late.stderr


async def test_cancel_a_schedule_deletes_it_and_is_audited(stack: Stack) -> None:
    schedule_id = fresh_id("ctl-sched")
    made = await sas(stack, "schedule", "create", schedule_id, "--every", "1d", *ORDER_FLAGS)
    assert made.returncode == 0, made.stderr

    done = await sas(stack, "cancel", schedule_id, "--reason", "stock take moved")
    assert done.returncode == 0, done.stderr and "schedule deleted" in done.stdout
    try:
        await stack.client.get_schedule_handle(schedule_id).describe()
        raise AssertionError("the schedule is still there")
    except RPCError as err:
        assert err.status == RPCStatusCode.NOT_FOUND
    [entry] = await _audit(stack, schedule_id)
    assert entry.action == "cancel" and "schedule deleted" in entry.changed

    unknown = await sas(stack, "cancel", fresh_id("ctl-nothing"))
    assert unknown.returncode == 1 and "no delayed task or schedule" in unknown.stderr


# ------------------------------------------------------------------ parking


async def test_park_a_hung_running_step_pauses_its_activity_and_retry_resumes_it(slow_stack: Stack) -> None:
    stack = slow_stack
    task_id = fresh_id("ctl-park")
    fault = await stack.add_fault(endpoint="payment.charge", kind="hang", hang_s=60, match_order_id=task_id)
    handle = await stack.submit(task_id)

    def charging(view: Any) -> bool:
        return any(a.activity_type.name == "payment.charge" for a in view.raw_description.pending_activities)

    await wait_until(lambda: _describe(stack, task_id), charging, what="charge running")
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Processing")

    parked = await sas(stack, "park", task_id, "--by", "carol", "--reason", "payment API hangs")
    assert parked.returncode == 0, parked.stderr
    assert "charge parked" in parked.stdout

    [activity] = (await _describe(stack, task_id)).raw_description.pending_activities
    assert activity.activity_type.name == "payment.charge" and activity.state in _PAUSED

    # The Agent heartbeats while it waits: it learns of the pause, hangs up, and its attempt
    # ends as paused - not at its complete-by, and no further attempt starts.
    def stopped(view: Any) -> bool:
        [pending] = view.raw_description.pending_activities
        return (
            pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
            and pending.last_failure.application_failure_info.type == "ActivityPause"
        )

    await wait_until(lambda: _describe(stack, task_id), stopped, what="the hung attempt stopped")
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Error", "ship": "Pending"}
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Error", "ship": "Pending"}
    assert await stack.task_state(task_id) == "Error"
    listed = as_json(await sas(stack, "list", "--state", "error", "--json"))
    assert task_id in [t["task_id"] for t in listed]
    shown = as_json(await sas(stack, "show", task_id, "--json"))
    [park] = [e for e in shown["operator_actions"] if e["action"] == "park"]
    assert park["actor"] == "carol" and "paused in Temporal" in park["changed"]

    again = await sas(stack, "park", task_id)
    assert again.returncode == 0 and "already parked" in again.stdout

    await stack.remove_fault(fault)
    resumed = await sas(stack, "retry", task_id, "--by", "carol", "--reason", "API fixed")
    assert resumed.returncode == 0, resumed.stderr
    assert "unpaused" in resumed.stdout
    still = [a for a in (await _describe(stack, task_id)).raw_description.pending_activities if a.state in _PAUSED]
    assert still == []
    assert (await handle.result()).state == "Processed"
    await wait_until(lambda: stack.task_state(task_id), lambda s: s == "Processed")
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Processed", "ship": "Processed"}
    actions = [(e.action, e.actor) for e in await _audit(stack, task_id)]
    assert ("park", "carol") in actions and ("retry", "carol") in actions


async def test_park_a_step_waiting_for_a_decision_uses_the_park_signal(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("ctl-park-wait")
    fault = await stack.add_fault(endpoint="payment.charge", kind="permanent", match_order_id=task_id)
    handle = await stack.submit(task_id)
    await wait_until(lambda: stack.step_states(task_id), lambda s: s.get("charge") == "Failed")

    parked = await sas(stack, "park", task_id, "--step", "charge", "--reason", "card blocked")
    assert parked.returncode == 0, parked.stderr
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Error", "ship": "Pending"}
    assert await stack.task_state(task_id) == "Error"
    live = as_json(await sas(stack, "status", task_id, "--json"))
    assert live["source"] == "scheduler" and live["needs_operator"] is True  # Temporal's own view agrees
    assert [e.action for e in await _audit(stack, task_id)] == ["park"]

    wrong = await sas(stack, "park", task_id, "--step", "nope")
    assert wrong.returncode == 1 and "unknown step" in wrong.stderr

    await stack.remove_fault(fault)
    resumed = await sas(stack, "retry", task_id, "--reason", "card unblocked")
    assert resumed.returncode == 0, resumed.stderr
    assert (await handle.result()).state == "Processed"


async def test_park_refuses_a_finished_task(stack: Stack) -> None:
    task_id = fresh_id("ctl-park-done")
    await (await stack.submit(task_id)).result()
    done = await sas(stack, "park", task_id)
    assert done.returncode == 1 and "has ended" in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------ history


async def test_show_keeps_every_attempt_with_its_locked_by_and_complete_by(stack_any_db: Stack) -> None:
    stack = stack_any_db
    task_id = fresh_id("ctl-attempts")
    await stack.add_fault(endpoint="payment.charge", kind="transient", times=1, match_order_id=task_id)
    assert (await (await stack.submit(task_id)).result()).state == "Processed"

    shown = as_json(await sas(stack, "show", task_id, "--json"))
    attempts = [(a["step"], a["attempt"], a["locked_by"]) for a in shown["attempts"]]
    assert attempts == [
        ("reserve", 1, "test-worker"),
        ("charge", 1, "test-worker"),
        ("charge", 2, "test-worker"),
        ("ship", 1, "test-worker"),
    ]
    for a in shown["attempts"]:
        started, until = datetime.fromisoformat(a["started_at"]), datetime.fromisoformat(a["complete_by"])
        assert timedelta(0) < until - started <= timedelta(seconds=stack.settings.default_step.complete_by_s + 1)
    # The step row has moved on (a success clears LockedBy); the attempts keep it.
    assert all(s["locked_by"] is None for s in shown["steps"])
    times = [e["at"] for e in shown["history"]]
    assert times == sorted(times) and len(shown["history"]) == 4
    table = await sas(stack, "show", task_id)
    assert table.returncode == 0 and "attempt 2" in table.stdout


async def test_a_resubmitted_run_carries_its_own_summary_and_details(stack: Stack) -> None:
    task_id = fresh_id("ctl-resub")
    fault = await stack.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id)
    assert (await (await stack.submit(task_id)).result()).state == "Compensated"
    await stack.remove_fault(fault)

    done = await sas(stack, "resubmit", task_id, "--by", "dave", "--reason", "address fixed")
    assert done.returncode == 0, done.stderr
    described = await _describe(stack, task_id)
    summary, details = await described.static_summary(), await described.static_details()
    assert summary is not None and summary.startswith(f"order {task_id} ·") and summary.endswith("· incarnation 2")
    assert details is not None and "**Incarnation 2**, resubmitted by dave" in details
    assert "7 CLI Way" not in details + summary and "Test Street" not in details + summary  # no address
    result = await stack.client.get_workflow_handle(task_id, result_type=TaskResult).result()
    assert result.state == "Processed"
