"""A real service answering a huge error - 900 KB of "é", 2.7 MB as Temporal's escaped JSON -
stops nothing: the Agent cuts it to MAX_ERROR_TEXT bytes and keeps the full text (up to
MAX_FULL_ERROR_TEXT) in the activity failure's details in history; the task's status query,
its row in the state store and `sas status` stay small and work. Dev server, demo services."""

from __future__ import annotations

import asyncio

from sas.task_models import TaskState, TaskStatus
from sas.task_models.text import MAX_ERROR_TEXT, MAX_FULL_ERROR_TEXT, json_size
from tests.cli.test_cli import as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack

# The order's status with its three steps: its events and errors at their bounds fit many times.
STATUS_BOUND = 64 * 1024


async def test_a_huge_error_answer_leaves_status_and_sas_status_working(stack: Stack) -> None:
    task_id = fresh_id("huge-error")
    await stack.add_fault(
        endpoint="payment.charge", kind="permanent", message="é", message_repeat=450_000, match_order_id=task_id
    )
    handle = await stack.submit(task_id)
    # Before the bound, the Supervisor failed on this task's status and it never ended.
    assert (await asyncio.wait_for(handle.result(), timeout=120)).state == TaskState.COMPENSATED

    status = await handle.query("status", result_type=TaskStatus)
    assert json_size(status.model_dump_json()) <= STATUS_BOUND
    charge = next(s for s in status.steps if s.name == "charge")
    assert charge.last_error is not None and "rejected the request (422 rejected): éé" in charge.last_error
    assert json_size(charge.last_error) <= MAX_ERROR_TEXT and "details.full_message" in charge.last_error

    record = await stack.record(task_id)
    assert record is not None
    stored = next(s for s in record.steps if s.name == "charge")
    assert stored.last_error == charge.last_error

    shown = as_json(await sas(stack, "status", task_id, "--json"))
    assert shown["state"] == "Compensated"

    # The full text, where an operator can read it: the activity failure's details in history.
    history = await handle.fetch_history()
    failed = [e for e in history.events if e.HasField("activity_task_failed_event_attributes")]
    details = failed[-1].activity_task_failed_event_attributes.failure.application_failure_info.details
    (full,) = await stack.client.data_converter.decode(details.payloads)
    assert full["full_message"].startswith("éé") and json_size(full["full_message"]) <= MAX_FULL_ERROR_TEXT
