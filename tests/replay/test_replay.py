"""Replay every recorded history against the current code: a change that would break running
workflows (non-determinism) fails here, in CI, before it reaches a worker."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from sas.payload_codec.converter import data_converter
from sas.workflows import ALL_WORKFLOWS
from tests.helpers import fresh_id
from tests.replay.scenarios import SCENARIOS
from tests.stack import start_stack

HISTORIES = Path(__file__).resolve().parents[1] / "histories"


def all_workflows() -> list[type]:
    from bench._payroll import PayrollNarrowWorkflow, PayrollRunWorkflow
    from sas.supervisor.run.workflow import SupervisorWorkflow
    from tests.e2e.children import GiftOrderWorkflow
    from tests.e2e.step_kinds import ApprovedOrderWorkflow, ChosenOrderWorkflow, KitWorkflow, PickupOrderWorkflow

    # CleanupWorkflow is among ALL_WORKFLOWS; the step kinds' and child tasks' test types have histories too.
    found = [
        *ALL_WORKFLOWS,
        SupervisorWorkflow,
        PayrollRunWorkflow,
        PayrollNarrowWorkflow,
        KitWorkflow,
        ApprovedOrderWorkflow,
        PickupOrderWorkflow,
        ChosenOrderWorkflow,
        GiftOrderWorkflow,
    ]
    return list(dict.fromkeys(found))


def patches_of(path: Path) -> set[str]:
    """The patches a recorded history's run took (its ``core_patch`` markers)."""
    found = set()
    for event in json.loads(path.read_text())["events"]:
        marker = event.get("markerRecordedEventAttributes", {})
        if marker.get("markerName") == "core_patch":
            for payload in marker["details"]["patch-data"]["payloads"]:
                found.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return found


def _payload_texts(path: Path) -> str:
    """Every payload of a recorded history, decoded, in one text."""
    texts = []
    for event in json.loads(path.read_text())["events"]:
        for attributes in event.values():
            if isinstance(attributes, dict):
                for part in ("input", "result"):
                    for payload in (attributes.get(part) or {}).get("payloads", []):
                        texts.append(base64.b64decode(payload["data"]).decode(errors="replace"))
    return "\n".join(texts)


def _marker_texts(path: Path) -> str:
    """Every marker's recorded result (a local activity's), decoded, in one text."""
    texts = []
    for event in json.loads(path.read_text())["events"]:
        details = event.get("markerRecordedEventAttributes", {}).get("details", {})
        for payload in details.get("result", {}).get("payloads", []):
            texts.append(base64.b64decode(payload["data"]).decode(errors="replace"))
    return "\n".join(texts)


def recorded() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def recorded_history(path: Path) -> WorkflowHistory:
    """A recorded history under the id it ran with, where the history says it: a child's id is derived from it."""
    events = json.loads(path.read_text())
    started = events["events"][0]["workflowExecutionStartedEventAttributes"]
    return WorkflowHistory.from_json(started.get("workflowId") or path.stem, events)


def test_there_are_histories_for_every_task_workflow_type() -> None:
    types = {
        json.loads(p.read_text())["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]
        for p in recorded()
    }
    assert {"OrderWorkflow", "PreorderWorkflow", "SupervisorWorkflow", "CleanupWorkflow"} <= types
    # A team's type from its own package (tests/examples/test_trip.py records them).
    assert "TripWorkflow" in types
    # A parallel group with branches (tests/examples/test_seated_trip.py records them).
    assert "SeatedTripWorkflow" in types
    # A parallel group, an approval and a skipped step (tests/supervisor/test_step_kinds.py records them).
    assert {"KitWorkflow", "ApprovedOrderWorkflow", "PickupOrderWorkflow"} <= types
    # Both paths of a choice (tests/supervisor/test_step_kinds.py records them too).
    assert {"ChosenOrderWorkflow"} <= types
    # A fan-out and its batches (tests/fanout/test_fan_out_e2e.py records them).
    assert {"PayrollRunWorkflow", "FanOutBatch"} <= types
    # A fan-out that told its running batch to start no more items (tests/fanout/test_fan_out_stop_starting.py).
    told = json.loads((HISTORIES / "fan_out_stop_starting.json").read_text())["events"]
    assert any(e["eventType"] == "EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED" for e in told)
    # A task cancelled mid-batch, before and after batches were told to stop: its batch cancelled.
    for name in ("fan_out_cancelled_batch", "fan_out_cancelled_mid_batch_before_stop_starting"):
        assert (HISTORIES / f"{name}.json").is_file()
    # Batches that answered in short (FanOutBatch.short_answer), and batches from before that listed every item.
    short = _payload_texts(HISTORIES / "fan_out_short_answers.json")
    assert '"short_answer":true' in short and '"others":"processed"' in short
    assert '"others"' not in _payload_texts(HISTORIES / "fan_out_within_tolerance.json")
    # A call held on the workflow's queue, started again on its service's own (tests/e2e/test_bulkheads.py).
    held = (HISTORIES / "order_held_in_service_queue.json").read_text()
    assert "ServiceSlotsFull" in held
    # Child tasks (tests/supervisor/test_child_tasks.py records them).
    assert "GiftOrderWorkflow" in types
    # A task whose accept recorded a compact plan (only what it decided), and ones recorded in full.
    assert '"step_policy"' in _marker_texts(HISTORIES / "order_compact_plan.json")
    assert '"steps"' not in _marker_texts(HISTORIES / "order_compact_plan.json")
    assert '"step_policy"' not in _marker_texts(HISTORIES / "order_compensated.json")
    # A redriven task, its steps before the redrive's kept (tests/examples/test_redrive.py records it).
    assert "redrive-keeps-steps" in patches_of(HISTORIES / "ticketed_trip_redriven.json")


@pytest.mark.parametrize("path", recorded(), ids=lambda p: p.stem)
async def test_history_replays_with_current_code(path: Path) -> None:
    history = recorded_history(path)
    # sas's own converter, as its workers have: it reads the plain payloads of older histories too.
    replayer = Replayer(workflows=all_workflows(), data_converter=data_converter(None))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name} no longer replays: {result.replay_failure}"


@pytest.mark.skipif(os.environ.get("SAS_RECORD_HISTORIES") != "1", reason="set SAS_RECORD_HISTORIES=1 to re-record")
@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_record(client, temporal_address, services, tmp_path, name: str) -> None:  # type: ignore[no-untyped-def]
    overrides, run = SCENARIOS[name]
    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    async with start_stack(client, temporal_address, services.url, url, **overrides) as stack:
        task_id = fresh_id(name.replace("_", "-"))
        workflow_id = await run(stack, task_id) or task_id
        HISTORIES.mkdir(exist_ok=True)
        history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
        (HISTORIES / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
        if name == "order_supervisor_retry":
            sweeps = await stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id).fetch_history()
            (HISTORIES / "supervisor_sweeps.json").write_text(json.dumps(json.loads(sweeps.to_json()), indent=1) + "\n")
