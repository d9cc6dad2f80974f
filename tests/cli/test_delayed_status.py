"""`sas status` and `sas show` of a delayed task say when it starts, not "no task"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack


async def test_status_and_show_of_a_delayed_task_say_when_it_starts(stack: Stack) -> None:
    task_id = fresh_id("cli-delayed")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "1h", "--json"))
    starts = (await stack.client.get_workflow_handle(task_id).describe()).execution_time
    assert starts is not None and starts - datetime.now(UTC) > timedelta(minutes=55)

    status = as_json(await sas(stack, "status", task_id, "--json"))
    assert status["state"] == "Scheduled" and status["due"] is False
    assert datetime.fromisoformat(status["scheduled_for"]) == starts
    for command in ("status", "show"):
        shown = await sas(stack, command, task_id)
        assert shown.returncode == 0, shown.stderr
        assert f"scheduled for {starts.strftime('%Y-%m-%d %H:%M')}" in shown.stdout
        assert "no task" not in shown.stdout + shown.stderr
    unknown = await sas(stack, "status", fresh_id("cli-nothing"))
    assert unknown.returncode == 1 and "no task" in unknown.stderr
    await stack.client.get_workflow_handle(task_id).terminate("test over")
