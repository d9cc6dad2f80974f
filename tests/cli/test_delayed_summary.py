"""A delayed task in the UI: until it starts, Temporal holds the workflow and
nothing of it runs, so its static summary and details are all the UI shows. They say when it
starts, in UTC; `sas reschedule` starts the new run with the new time in them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sas.workflows.summaries import delayed_start
from tests.cli.test_cli import ORDER_FLAGS, as_json, sas
from tests.helpers import fresh_id
from tests.stack import Stack


def test_the_start_comes_first_in_utc() -> None:
    at = datetime(2026, 11, 25, 15, 4, 5, tzinfo=UTC).astimezone()  # any zone in, UTC out
    summary, details = delayed_start("o-1", "order o-1 · 2 × BOOK-1", "### order `o-1`", at)
    assert summary == "starts 2026-11-25 15:04:05 UTC · order o-1 · 2 × BOOK-1"
    assert details.startswith("**Delayed: starts 2026-11-25 15:04:05 UTC.**")
    assert "`sas reschedule o-1 --at <time>`" in details and details.endswith("### order `o-1`")


async def test_a_delayed_task_says_when_it_starts_and_reschedule_updates_it(stack: Stack) -> None:
    task_id = fresh_id("ui-delayed")
    as_json(await sas(stack, "submit", *ORDER_FLAGS, "--id", task_id, "--in", "1h", "--json"))
    described = await stack.client.get_workflow_handle(task_id).describe()
    starts = described.execution_time
    assert starts is not None
    summary, details = await described.static_summary(), await described.static_details()
    # Submitted "in 1h": the start written is the one Temporal keeps, give or take the round trip.
    said = datetime.strptime(summary.split(" · ")[0], "starts %Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)  # type: ignore[union-attr]
    assert abs(said - starts) < timedelta(seconds=5)
    assert details is not None and details.startswith(f"**Delayed: starts {said:%Y-%m-%d %H:%M:%S} UTC.**")

    moved = as_json(await sas(stack, "reschedule", task_id, "--in", "3h", "--json"))
    again = await stack.client.get_workflow_handle(task_id).describe()
    assert again.run_id == moved["run_id"] and again.execution_time is not None
    summary = await again.static_summary()
    assert summary is not None
    new = datetime.strptime(summary.split(" · ")[0], "starts %Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)
    assert abs(new - again.execution_time) < timedelta(seconds=5) and new - said > timedelta(hours=1, minutes=55)
    assert f"order {task_id}" in summary
    await stack.client.get_workflow_handle(task_id).terminate("test over")
