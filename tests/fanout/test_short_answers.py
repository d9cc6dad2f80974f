"""A batch answers its parent in short: the items that ended as hoped as one count, the others
listed, so the parent's history grows with the failures, not with the items; the parent reads
every item's outcome from it, and a batch not asked for a short answer (started by a parent of
the code before) lists every item, as it always did."""

from __future__ import annotations

import base64
import json
from typing import Any

from temporalio.testing import WorkflowEnvironment

from bench._payroll import PayrollRunWorkflow
from sas.api import TaskState
from sas.api.testing import FakeAgents, run_task
from sas.task_models.fanout import FanOutBatchResult, FanOutItem, ItemOutcome
from tests.helpers import fresh_id
from tests.task_types.test_fan_out_item_choices import answers, env, pay_result  # noqa: F401 - the module's env

PAYROLL = {"recipients": [{"id": f"r{n}", "cents": 100 + n} for n in range(30)]}


async def batch_answers(env: WorkflowEnvironment, task_id: str) -> list[dict[str, Any]]:  # noqa: F811
    found = []
    async for event in env.client.get_workflow_handle(task_id).fetch_history_events():
        if event.HasField("child_workflow_execution_completed_event_attributes"):
            payload = event.child_workflow_execution_completed_event_attributes.result.payloads[0]
            found.append(json.loads(payload.data))
    return found


async def test_a_batch_lists_only_what_did_not_end_as_hoped_and_the_parent_counts_every_item(
    env: WorkflowEnvironment,  # noqa: F811
) -> None:
    task_id = fresh_id("short")
    agents = FakeAgents(answers=answers(), refuse_items={"payroll.pay": "r7"})
    result = await run_task(env, PayrollRunWorkflow, PAYROLL, agents, task_id=task_id, timeout_s=60)
    assert result.state == TaskState.PROCESSED
    counts = pay_result(result.steps)
    assert (counts["items"], counts["processed"], counts["failed_items"], counts["compensated"]) == (30, 29, 1, 1)
    forward = [a for a in await batch_answers(env, task_id) if a.get("others") == "processed"]
    assert len(forward) == 3  # batches of 10
    listed = [o for a in forward for o in a["outcomes"]]
    assert [(o["key"], o["state"]) for o in listed] == [("r7", "failed")]


def test_a_full_answer_is_read_as_it_always_was_and_a_short_one_names_every_item() -> None:
    items = [FanOutItem(key=k, item={}) for k in ("a", "b", "c")]
    full = FanOutBatchResult(outcomes=[ItemOutcome(key=k, state="processed") for k in ("a", "b", "c")])
    assert full.of(items) == full.outcomes
    short = FanOutBatchResult(outcomes=[ItemOutcome(key="b", state="failed", error="e")], others="processed")
    assert {o.key: o.state for o in short.of(items)} == {"a": "processed", "b": "failed", "c": "processed"}


def test_a_batch_of_the_code_before_answered_in_full_and_its_history_still_replays() -> None:
    # Recorded before short answers: every item listed, no "others" (tests/replay replays it).
    from tests.replay.test_replay import HISTORIES

    events = json.loads((HISTORIES / "fan_out_within_tolerance.json").read_text())["events"]
    results = [
        json.loads(
            base64.b64decode(e["childWorkflowExecutionCompletedEventAttributes"]["result"]["payloads"][0]["data"])
        )
        for e in events
        if "childWorkflowExecutionCompletedEventAttributes" in e
    ]
    assert results and all("others" not in r and r["outcomes"] for r in results)
