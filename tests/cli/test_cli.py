"""The ``sas`` command as a person uses it: a real process against the test stack."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import Client

from sas.task_models import TaskState
from sas_demo_services.launcher import ServiceProcess
from tests import cli_process
from tests import stack as stacks
from tests.helpers import fresh_id, wait_until
from tests.stack import Stack, order, start_stack

ORDER_FLAGS = [
    "--type",
    "order",
    "--set",
    "customer_id=c-cli",
    "--set",
    "sku=BOOK-7",
    "--set",
    "amount_cents=2500",
    "--set",
    "address=7 CLI Way",
    "--set",
    "quantity=2",
]


async def sas(
    stack: Stack, *args: str, columns: int = 200, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``env``: more settings for the command (the stack's own, where a command needs them)."""
    env = {
        **os.environ,
        "SAS_TEMPORAL__ADDRESS": stack.settings.temporal.address,
        "SAS_TEMPORAL__TASK_QUEUE": stack.settings.temporal.task_queue,
        "SAS_DATABASE__URL": stack.settings.database.url,
        "COLUMNS": str(columns),
        **(env or {}),
    }
    argv = [sys.executable, "-m", "sas.cli.main", *args]
    return await asyncio.to_thread(cli_process.run, argv, capture_output=True, text=True, env=env, timeout=120)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_submit_status_list(stack: Stack) -> None:
    task_id = fresh_id("cli-order")
    submitted = as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    assert submitted["submitted"] is True and submitted["result"]["state"] == "Processed"

    status = as_json(await sas(stack, "status", task_id, "--json"))
    assert status["state"] == "Processed" and [s["state"] for s in status["steps"]] == ["Processed"] * 3

    listed = as_json(await sas(stack, "list", "--state", "processed", "--json"))
    assert task_id in [t["task_id"] for t in listed]

    again = await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--json")
    assert again.returncode != 0 and "already exists and is Processed" in again.stderr  # a task id is one task
    table = await sas(stack, "status", task_id)
    assert table.returncode == 0 and "Processed" in table.stdout and "reserve" in table.stdout


async def test_bad_input_is_refused_with_the_field_named_and_nothing_started(stack: Stack, tmp_path) -> None:
    task_id = fresh_id("cli-bad")
    done = await sas(stack, "submit", *ORDER_FLAGS[:-4], "--set", "quantity=0", "--id", task_id)
    assert done.returncode == 1
    assert "quantity" in done.stderr and "greater than 0" in done.stderr and "address" in done.stderr
    assert "Traceback" not in done.stderr
    bad_file = tmp_path / "order.json"
    bad_file.write_text('{"sku": ')
    done = await sas(stack, "submit", "--type", "order", str(bad_file), "--id", task_id)
    assert done.returncode == 1 and "not valid JSON" in done.stderr
    done = await sas(stack, "submit", *ORDER_FLAGS, "--id", "bad id with spaces")
    assert done.returncode == 1 and "invalid task id" in done.stderr
    done = await sas(stack, "list", "--state", "exploded")
    assert done.returncode == 1 and "unknown state" in done.stderr
    assert await stack.record(task_id) is None


async def test_retry_rejected_with_the_reason(stack: Stack) -> None:
    task_id = fresh_id("cli-rej")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--wait", "--json"))
    done = await sas(stack, "retry", task_id, "--reason", "just because")
    assert done.returncode == 1 and "already finished" in done.stderr
    done = await sas(stack, "retry", fresh_id("nobody"))
    assert done.returncode == 1 and "no task" in done.stderr


async def test_settings_errors_are_clear(stack: Stack) -> None:
    env_bad = await asyncio.to_thread(
        cli_process.run,
        [sys.executable, "-m", "sas.cli.main", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SAS_DATABASE__URL": "mysql://nope", "SAS_TEMPORAL__ADDRESS": "no-port"},
    )
    assert env_bad.returncode == 2
    assert "SAS_DATABASE__URL" in env_bad.stderr and "SAS_TEMPORAL__ADDRESS" in env_bad.stderr
    assert "Traceback" not in env_bad.stderr


async def test_delayed_task_does_not_start_early(stack: Stack) -> None:
    task_id = fresh_id("cli-later")
    before = datetime.now(UTC)
    out = as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "4s", "--json"))
    assert out["starts_in_s"] == 4.0
    description = await stack.client.get_workflow_handle(task_id).describe()
    assert description.execution_time is not None and (description.execution_time - before).total_seconds() >= 3.9
    assert await stack.record(task_id) is None  # not accepted yet

    record = await wait_until(
        lambda: stack.record(task_id),
        lambda r: r is not None and r.task.state == "Processed",
        timeout=60,
        what="the delayed order to run",
    )
    assert record is not None and (record.task.created_at - before).total_seconds() >= 3.9
    done = await sas(stack, "submit", *ORDER_FLAGS, "--at", "2001-01-01T00:00:00+00:00")
    assert done.returncode == 1 and "in the past" in done.stderr


async def test_schedule_fires_and_each_run_is_its_own_task(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    schedule_id = fresh_id("sched")
    monkeypatch.setenv("SAS_SCHEDULES__MIN_INTERVAL_S", "1")  # runs every 2s, so that the test sees two
    created = await sas(stack, "schedule", "create", schedule_id, "--every", "2s", *ORDER_FLAGS)
    assert created.returncode == 0, created.stderr
    try:

        async def runs() -> list[str]:
            found = []
            async for wf in stack.client.list_workflows(f"TemporalScheduledById = '{schedule_id}'"):
                found.append(wf.id)
            return found

        ids = await wait_until(runs, lambda found: len(found) >= 2, timeout=60, what="two scheduled runs")
        for run_id in ids[:2]:
            result = await stack.client.get_workflow_handle(run_id).result()
            assert result["state"] == TaskState.PROCESSED
            keys = {e["idempotency_key"] for e in await stack.ledger(run_id)}
            assert keys == {f"{run_id}:reserve", f"{run_id}:charge", f"{run_id}:ship"}
        listed = as_json(await sas(stack, "schedule", "list", "--json"))
        assert schedule_id in [s["id"] for s in listed]
        assert (await sas(stack, "schedule", "pause", schedule_id)).returncode == 0
        paused = next(s for s in as_json(await sas(stack, "schedule", "list", "--json")) if s["id"] == schedule_id)
        assert paused["paused"] is True
    finally:
        assert (await sas(stack, "schedule", "delete", schedule_id)).returncode == 0
    missing = await sas(stack, "schedule", "delete", schedule_id)
    assert missing.returncode == 1 and "no schedule" in missing.stderr


async def test_alerts_command_lists_acks_and_resolves(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    """A declined card parks the order (this stack's ladder ends in ``park``), so its alert stays
    open until an operator acts: each command's effect is read back from the state store."""
    fast = stacks.test_settings(temporal_address, services.url, sqlite_url).supervisor
    parks = fast.model_copy(update={"outcome": "park"})
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor_settings=parks) as stack:
        declined = fresh_id("cli-declined")
        handle = await stack.submit(declined, order(card="4000000000000002"))
        await wait_until(lambda: stack.task_state(declined), lambda s: s == "Error", what="the order parked")
        [alert] = await wait_until(lambda: stack.alerts(declined), lambda a: len(a) == 1, what="the alert")
        assert alert.status == "open" and alert.step == "charge"

        listed = as_json(await sas(stack, "alerts", "--json"))  # open ones by default
        [mine] = [a for a in listed if a["task_id"] == declined]
        assert mine["id"] == alert.id and mine["status"] == "open" and mine["suggested_action"]
        assert "card_declined" in (mine["last_error"] or mine["message"])

        async def stored_status() -> str:
            [now] = await stack.alerts(declined)
            return now.status

        acked = await sas(stack, "alerts", "ack", str(alert.id))
        assert acked.returncode == 0, acked.stderr
        assert await stored_status() == "acked"
        assert [a["id"] for a in as_json(await sas(stack, "alerts", "--status", "acked", "--json"))].count(
            alert.id
        ) == 1
        assert alert.id not in [a["id"] for a in as_json(await sas(stack, "alerts", "--json"))]

        resolved = await sas(stack, "alerts", "resolve", str(alert.id))
        assert resolved.returncode == 0, resolved.stderr
        assert await stored_status() == "resolved"
        closed = [
            a for a in as_json(await sas(stack, "alerts", "--status", "resolved", "--json")) if a["id"] == alert.id
        ]
        assert [a["status"] for a in closed] == ["resolved"]
        # The alerts commands change alerts only: the order is still parked for a decision.
        assert await stack.task_state(declined) == "Error"
        await handle.terminate("test over")

        missing = await sas(stack, "alerts", "ack", "999999")
        assert missing.returncode == 1 and "no alert 999999" in missing.stderr
