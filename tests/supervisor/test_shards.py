"""S Supervisor shards: each Supervisor workflow scans and decides only for
the task ids in its own hash range, none decides twice, and every order still ends where its
faults put it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from sas.state_store.tables import shard_of
from sas.supervisor.models import ApplyInput, ScanResult
from tests.helpers import fresh_id, wait_until
from tests.supervisor.conftest import Rig
from tests.supervisor.outcomes import check_batch, submit_batch
from tests.supervisor.test_webhook import all_alerts, serve_hook, webhook  # noqa: F401 - fixture

SHARDS = 2


def ids_per_shard(rig: Rig, prefix: str, kinds: list[str]) -> dict[str, list[str]]:
    """One fresh task id of each kind for every shard."""
    s = rig.settings.supervisor
    found: dict[str, list[str]] = {kind: [] for kind in kinds}
    for kind in kinds:
        for shard in range(s.shards):
            while True:
                task_id = fresh_id(f"{prefix}-{kind}")
                if s.shard_for_bucket(shard_of(task_id)) == shard:
                    found[kind].append(task_id)
                    break
    return found


async def activities_of(rig: Rig, workflow_id: str) -> tuple[list[ApplyInput], list[ScanResult]]:
    """What one Supervisor workflow asked to apply, and what its scans found, from its history."""
    history = await rig.client.get_workflow_handle(workflow_id).fetch_history()
    convert = rig.client.data_converter
    names: dict[int, str] = {}
    applied: list[ApplyInput] = []
    scanned: list[ScanResult] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            names[event.event_id] = attrs.activity_type.name
            if attrs.activity_type.name == "supervisor.apply":
                applied += await convert.decode(attrs.input.payloads, [ApplyInput])
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            if names.get(completed.scheduled_event_id) == "supervisor.scan":
                scanned += await convert.decode(completed.result.payloads, [ScanResult])
    return applied, scanned


@pytest.mark.parametrize("db_url", ["sqlite", "postgres"], indirect=True)
async def test_each_shard_decides_only_for_its_own_tasks(make_rig) -> None:  # type: ignore[no-untyped-def]
    # One run per Supervisor workflow for the whole test, so one history shows all it did.
    rig: Rig = await make_rig(shards=SHARDS, sweeps_per_run=100_000)
    s = rig.settings.supervisor
    shard_ids = [s.shard_workflow_id(k) for k in range(SHARDS)]
    assert len(set(shard_ids)) == SHARDS and s.workflow_id not in shard_ids
    # Two Supervisor workers for availability; each starts (or finds) every shard's workflow.
    await rig.start_supervisor("sup-s1", s.workflow_id)
    await rig.start_supervisor("sup-s2", s.workflow_id)
    for workflow_id in shard_ids:
        described = await rig.client.get_workflow_handle(workflow_id).describe()
        assert described.status == WorkflowExecutionStatus.RUNNING, workflow_id
        assert described.workflow_type == "SupervisorWorkflow", workflow_id
        assert described.task_queue == rig.settings.temporal.supervisor_task_queue, workflow_id

        async def runs(workflow_id: str = workflow_id) -> list[str | None]:
            return [w.run_id async for w in rig.client.list_workflows(f"WorkflowId = '{workflow_id}'")]

        # Both workers started every shard; Temporal's workflow-id uniqueness kept one run of each.
        assert await wait_until(runs, what=f"{workflow_id} in visibility") == [described.run_id]

    kinds = ["retry", "spent", "permanent"]
    batch = await submit_batch(rig, "shard", dict.fromkeys(kinds, SHARDS), ids_per_shard(rig, "shard", kinds))
    rows = await check_batch(batch)

    owner = {task_id: s.shard_for_bucket(shard_of(task_id)) for task_id in batch.expected}
    assert set(owner.values()) == set(range(SHARDS))
    proposed: Counter[tuple[str, str, int, str]] = Counter()
    by_shard: dict[tuple[str, str, int, str], int] = {}
    for shard, workflow_id in enumerate(shard_ids):
        applied, scanned = await activities_of(rig, workflow_id)
        assert applied and all(a.shard == shard for a in applied)
        seen = [d.task_id for scan in scanned for d in scan.due if d.task_id in owner]
        assert seen and all(owner[t] == shard for t in seen), (shard, seen)
        for request in applied:
            for d in request.decisions:
                assert owner[d.task_id] == shard, (shard, d)
                key = (d.task_id, d.step, d.failure_count, d.kind)
                proposed[key] += 1
                by_shard[key] = shard
    # Every decision recorded was proposed by its task's shard, and only by it.
    for d in rows:
        key = (d.task_id, d.step, d.failure_count, d.kind)
        assert key in proposed and by_shard[key] == owner[d.task_id], key
    # decided_by names the Supervisor worker (not the shard workflow) that claimed it.
    assert {d.decided_by for d in rows} <= {"sup-s1", "sup-s2"}


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_sharded_supervisors_post_each_alert_once(make_rig, serve_hook) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    hook, url = await serve_hook("slow")
    rig: Rig = await make_rig(shards=SHARDS, outcome="park", webhook=webhook(url))
    await rig.start_supervisor("sup-hook-shards", rig.settings.supervisor.workflow_id)
    ids = ids_per_shard(rig, "shard-hook", ["permanent"])["permanent"]
    handles = []
    for task_id in ids:
        await rig.add_fault(endpoint="shipping.ship", kind="permanent", status=422, match_order_id=task_id)
        handles.append(await rig.submit(task_id))

    async def ours() -> list[Any]:
        return [a for a in await all_alerts(rig) if a.task_id in ids]

    alerts = await wait_until(
        ours,
        lambda a: len(a) == len(ids) and all(x.delivered_at is not None for x in a),
        timeout=60,
        what="every alert delivered",
    )
    for handle in handles:
        await handle.terminate("test over")
    assert Counter(a["id"] for a in hook.accepted()) == Counter(a.id for a in alerts)
