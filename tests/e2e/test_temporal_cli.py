"""Using sas from the plain ``temporal`` CLI: starting orders and sending signals."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from sas.task_models import TaskState, TaskStatus
from tests.conftest import temporal_binary
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack

GOOD_ORDER = {"customer_id": "c-9", "sku": "BOOK-9", "quantity": 1, "amount_cents": 1299, "address": "9 CLI Road"}


async def temporal_cli(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [temporal_binary(), *args, "--address", address]
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=60)


async def cli_start(stack: Stack, task_id: str, raw_input: str) -> subprocess.CompletedProcess[str]:
    return await temporal_cli(
        stack.settings.temporal.address,
        "workflow",
        "start",
        "--type",
        "OrderWorkflow",
        "--task-queue",
        stack.settings.temporal.task_queue,
        "--workflow-id",
        task_id,
        "--input",
        raw_input,
    )


async def waiting_step(stack: Stack, task_id: str) -> TaskStatus:
    handle = stack.client.get_workflow_handle(task_id)

    async def status() -> TaskStatus:
        return await handle.query("status", result_type=TaskStatus)

    return await wait_until(status, lambda s: s.state == TaskState.FAILED, what=f"{task_id} waiting for a decision")


async def test_order_started_from_the_temporal_cli_completes(stack: Stack) -> None:
    task_id = fresh_id("cli")
    started = await cli_start(stack, task_id, json.dumps(GOOD_ORDER))
    assert started.returncode == 0, started.stderr
    result = await stack.client.get_workflow_handle(task_id).result()
    assert result["state"] == "Processed"
    assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge", "ship"]


@pytest.mark.parametrize(
    "raw, message",
    [
        (json.dumps({**GOOD_ORDER, "quantity": 0}), "quantity"),
        (json.dumps({**GOOD_ORDER, "colour": "red"}), "colour"),
        (json.dumps([1, 2, 3]), "must be a JSON object"),
    ],
)
async def test_invalid_input_from_the_temporal_cli_fails_fast(stack: Stack, raw: str, message: str) -> None:
    task_id = fresh_id("cli-bad")
    started = await cli_start(stack, task_id, raw)
    assert started.returncode == 0, started.stderr
    with pytest.raises(WorkflowFailureError) as caught:
        await stack.client.get_workflow_handle(task_id).result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidInput" and cause.non_retryable
    assert message in cause.message
    history = await stack.client.get_workflow_handle(task_id).fetch_history()
    # Failed in its first workflow task: no retries, no activity ever scheduled.
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert sum(e.HasField("workflow_task_failed_event_attributes") for e in history.events) == 0


async def test_status_and_show_tell_a_task_refused_for_its_input_as_exactly_that(stack: Stack) -> None:
    """A run whose input its type refuses never reaches the state store: `sas status` and
    `sas show` say it failed and why, not Pending and not "no such task"."""
    from tests.cli.test_cli import as_json, sas

    task_id = fresh_id("cli-refused")
    started = await cli_start(stack, task_id, json.dumps({"customer_id": "c-1"}))
    assert started.returncode == 0, started.stderr
    with pytest.raises(WorkflowFailureError):
        await stack.client.get_workflow_handle(task_id).result()

    status = as_json(await sas(stack, "status", task_id, "--json"))
    assert (status["state"], status["accepted"], status["error_type"]) == ("Failed", False, "InvalidInput")
    assert "invalid" in status["reason"] and status["steps"] == []
    said = await sas(stack, "status", task_id)
    assert said.returncode == 0 and "Failed before sas accepted it, so nothing was done" in said.stdout
    shown = await sas(stack, "show", task_id)
    assert shown.returncode == 0 and "InvalidInput: invalid" in shown.stdout


async def test_malformed_json_is_refused_by_the_cli_and_starts_nothing(stack: Stack) -> None:
    task_id = fresh_id("cli-json")
    started = await cli_start(stack, task_id, '{"customer_id": "c", ')
    assert started.returncode != 0
    described = await temporal_cli(stack.settings.temporal.address, "workflow", "describe", "--workflow-id", task_id)
    assert described.returncode != 0  # no such workflow


async def test_retry_signal_from_the_temporal_cli(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("sig-retry")
    # Two 503s use up the Agent's two quick attempts; the third call succeeds.
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    handle = await stack.submit(task_id)
    status = await waiting_step(stack, task_id)
    assert [s.state for s in status.steps] == ["Processed", "Processed", "Failed"]
    assert await stack.step_states(task_id) == {"reserve": "Processed", "charge": "Processed", "ship": "Failed"}

    sent = await temporal_cli(
        stack.settings.temporal.address,
        "workflow",
        "signal",
        "--workflow-id",
        task_id,
        "--name",
        "retry",
        "--input",
        json.dumps({"by": "cli-test", "reason": "service fixed"}),
    )
    assert sent.returncode == 0, sent.stderr
    result = await handle.result()
    assert result.state == TaskState.PROCESSED
    ship = (await stack.record(task_id)).steps[2]  # type: ignore[union-attr]
    assert ship.state == "Processed"
    assert len([e for e in await stack.ledger(task_id) if e["action"] == "ship"]) == 1
    final = await handle.query("status", result_type=TaskStatus)
    assert any("retry by cli-test: service fixed" in e for e in final.events)


async def test_compensate_signal_from_the_temporal_cli(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("sig-comp")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", match_order_id=task_id)
    handle = await stack.submit(task_id)
    await waiting_step(stack, task_id)

    sent = await temporal_cli(
        stack.settings.temporal.address,
        "workflow",
        "signal",
        "--workflow-id",
        task_id,
        "--name",
        "compensate",
        "--input",
        json.dumps({"by": "cli-test"}),
    )
    assert sent.returncode == 0, sent.stderr
    result = await handle.result()
    assert result.state == TaskState.COMPENSATED
    actions = [e["action"] for e in await stack.ledger(task_id)]
    assert actions == ["reserve", "charge", "refund", "release"]
    assert await stack.step_states(task_id) == {
        "reserve": "Compensated",
        "charge": "Compensated",
        "ship": "Compensated",
    }


async def test_signal_naming_the_wrong_step_is_ignored_and_recorded(stack_no_supervisor: Stack) -> None:
    stack = stack_no_supervisor
    task_id = fresh_id("sig-wrong")
    await stack.add_fault(endpoint="shipping.ship", kind="transient", times=2, match_order_id=task_id)
    handle = await stack.submit(task_id)
    await waiting_step(stack, task_id)
    await handle.signal("retry", {"step": "charge", "by": "someone"})
    status = await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: any("the step waiting for a decision is ship" in e for e in s.events),
        what="the ignored retry to be recorded",
    )
    assert status.state == TaskState.FAILED
    await handle.signal("retry", {"step": "ship", "by": "someone"})
    assert (await handle.result()).state == TaskState.PROCESSED
