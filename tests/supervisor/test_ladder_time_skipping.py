"""The ladder's long waits - cool-downs of an hour - run through the real SupervisorWorkflow
on Temporal's time-skipping test server, with its activities replaced by an in-memory
store registered under the same names. Nothing here waits for real."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sas.api.testing import time_skipping_environment
from sas.supervisor.models import (
    ApplyInput,
    ApplyResult,
    DueStep,
    ScanInput,
    ScanResult,
    SupervisorInput,
    SupervisorPolicy,
    SweepStats,
)
from sas.supervisor.run.workflow import SupervisorWorkflow
from sas.task_models.ladder import Ladder
from tests.helpers import wait_until
from tests.replay.test_replay import HISTORIES

HOUR = 3600.0


@pytest_asyncio.fixture(scope="module")
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await time_skipping_environment()
    try:
        yield env
    finally:
        await env.shutdown()


class FakeStore:
    """One Failed step and a Scheduler that fails it again at once on every retry."""

    def __init__(self, ladder: Ladder, policy: SupervisorPolicy) -> None:
        self.ladder, self.policy = ladder, policy
        self.failed_at: datetime | None = None
        self.count = 0
        self.version = 1
        self.complete_by: datetime | None = None
        self.state = "Failed"
        self.log: list[tuple[str, int, datetime]] = []

    @activity.defn(name="supervisor.scan")
    async def scan(self, request: ScanInput) -> ScanResult:
        # The server's (skipped) clock, not the wall clock.
        now = activity.info().current_attempt_scheduled_time
        if self.failed_at is None:
            self.failed_at = self.complete_by = now
        due = []
        if self.state == "Failed" and self.complete_by is not None and self.complete_by <= now:
            due.append(
                DueStep(
                    task_id="t",
                    task_type="order",
                    workflow_type="OrderWorkflow",
                    task_queue="q",
                    step="ship",
                    state="Failed",
                    failure_count=self.count,
                    version=self.version,
                    complete_by=self.complete_by,
                    complete_by_s=5,
                    updated_at=self.failed_at,
                    ladder=self.ladder,
                )
            )
        return ScanResult(policy=self.policy, due=due)

    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        now = activity.info().current_attempt_scheduled_time
        for d in request.decisions:
            if (d.seen_failure_count, d.seen_version) != (self.count, self.version):
                continue
            self.log.append((d.kind, d.failure_count, now))
            self.count, self.complete_by = d.failure_count, d.next_look_at
            if d.kind == "retry":  # the Scheduler re-runs the step, and it fails again
                self.version += 1
                self.failed_at = self.complete_by = now
            elif d.kind in ("compensate", "park"):
                self.state = "Compensated" if d.kind == "compensate" else "Error"
        return ApplyResult(claimed=len(request.decisions))


POLICY = SupervisorPolicy(interval_s=1.0, max_interval_s=600.0, orphan_check_s=0, queue_check_s=0, overdue_grace_s=1)


@pytest.mark.parametrize("outcome", ["compensate", "park"])
async def test_cool_down_tries_an_hour_apart_then_the_outcome(skipping_env: WorkflowEnvironment, outcome: str) -> None:
    ladder = Ladder(retries=1, retry_delay_s=2, cooldown_s=HOUR, cooldown_tries=2, outcome=outcome)
    store = FakeStore(ladder, POLICY)
    queue = f"sup-skip-{uuid.uuid4().hex[:8]}"
    client = skipping_env.client
    async with Worker(client, task_queue=queue, workflows=[SupervisorWorkflow], activities=[store.scan, store.apply]):
        handle = await client.start_workflow(
            "SupervisorWorkflow", SupervisorInput(), id=f"sup-{queue}", task_queue=queue
        )
        # Time skips while we sleep on the test server's clock.
        for _ in range(12):
            if store.state != "Failed":
                break
            await skipping_env.sleep(HOUR / 2)
        await handle.terminate("done")

    kinds = [(k, n) for k, n, _ in store.log]
    assert kinds == [("wait", 0), ("retry", 1), ("wait", 1), ("retry", 2), ("wait", 2), ("retry", 3), (outcome, 4)]
    times = {(k, n): at for k, n, at in store.log}
    assert times[("retry", 1)] - times[("wait", 0)] >= timedelta(seconds=2)
    # Each cool-down try comes no earlier than an hour after the failure before it.
    assert times[("retry", 2)] - times[("retry", 1)] >= timedelta(seconds=HOUR)
    assert times[("retry", 3)] - times[("retry", 2)] >= timedelta(seconds=HOUR)
    assert store.state == ("Compensated" if outcome == "compensate" else "Error")


async def test_idle_sweeps_back_off_and_a_wake_returns_to_the_base_interval(skipping_env: WorkflowEnvironment) -> None:
    store = FakeStore(Ladder(), POLICY)
    store.state = "Processed"  # nothing to do
    queue = f"sup-idle-{uuid.uuid4().hex[:8]}"
    client = skipping_env.client
    async with Worker(client, task_queue=queue, workflows=[SupervisorWorkflow], activities=[store.scan, store.apply]):
        handle = await client.start_workflow(
            "SupervisorWorkflow", SupervisorInput(), id=f"sup-{queue}", task_queue=queue
        )

        async def stats() -> SweepStats:
            return await handle.query("stats", result_type=SweepStats)

        for _ in range(20):
            if (await stats()).interval_s >= POLICY.max_interval_s:
                break
            await skipping_env.sleep(POLICY.max_interval_s)
        idle = await stats()
        assert idle.interval_s == POLICY.max_interval_s
        sweeps_when_idle = idle.sweeps
        await handle.signal("wake")
        woken = await wait_until(stats, lambda s: s.sweeps > sweeps_when_idle, timeout=30, what="a sweep after wake")
        assert woken.interval_s < POLICY.max_interval_s
        await handle.terminate("done")


class Backlog:
    """``size`` steps, all due at once, refused for good (or failing for now: ``permanent``);
    each apply carries out the first ``per_sweep`` of its decisions."""

    def __init__(self, size: int, per_sweep: int, policy: SupervisorPolicy, permanent: bool = True) -> None:
        self.due = [f"t{i}" for i in range(size)]
        self.refused = set(self.due) if permanent else set()
        self.per_sweep, self.policy = per_sweep, policy
        self.decided: list[tuple[str, str, datetime]] = []

    @activity.defn(name="supervisor.scan")
    async def scan(self, request: ScanInput) -> ScanResult:
        now = activity.info().current_attempt_scheduled_time
        due = [
            DueStep(
                task_id=task_id,
                task_type="order",
                workflow_type="OrderWorkflow",
                task_queue="q",
                step="reserve",
                state="Failed",
                failure_count=0,
                version=1,
                complete_by=now,
                complete_by_s=5,
                permanent=task_id in self.refused,
                updated_at=now,
                ladder=Ladder(),
            )
            for task_id in self.due
            if task_id in self.refused or not request.refusals_only
        ]
        return ScanResult(policy=self.policy, due=due)

    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        now = activity.info().current_attempt_scheduled_time
        started = request.decisions[: self.per_sweep]
        for d in started:
            self.decided.append((d.task_id, d.kind, now))
            self.due.remove(d.task_id)
        return ApplyResult(claimed=len(started))


async def test_a_wake_during_a_sweep_brings_the_next_sweep_at_once(skipping_env: WorkflowEnvironment) -> None:
    """A failure recorded after a sweep's scan wakes the Supervisor while it applies: the next
    sweep reads it at once, not an interval later."""
    policy = SupervisorPolicy(interval_s=60.0, max_interval_s=600.0, orphan_check_s=0, queue_check_s=0)
    store = Backlog(size=1, per_sweep=1, policy=policy)
    queue = f"sup-wake-{uuid.uuid4().hex[:8]}"
    client = skipping_env.client
    workflow_id = f"sup-{queue}"
    woke = False

    @activity.defn(name="supervisor.apply")
    async def apply_then_a_failure(request: ApplyInput) -> ApplyResult:
        nonlocal woke
        result = await store.apply(request)
        if not woke:  # another task fails now, after this sweep's scan, and wakes the Supervisor
            woke = True
            store.due.append("late")
            await client.get_workflow_handle(workflow_id).signal("wake")
        return result

    async with Worker(
        client, task_queue=queue, workflows=[SupervisorWorkflow], activities=[store.scan, apply_then_a_failure]
    ):
        handle = await client.start_workflow("SupervisorWorkflow", SupervisorInput(), id=workflow_id, task_queue=queue)
        for _ in range(5):
            if len(store.decided) >= 2:
                break
            await skipping_env.sleep(policy.interval_s)
        await handle.terminate("done")

    assert [t for t, _, _ in store.decided] == ["t0", "late"]
    assert store.decided[1][2] - store.decided[0][2] < timedelta(seconds=policy.interval_s)


async def test_a_refusal_recorded_during_a_sweep_is_decided_before_the_rest_of_its_batch(
    skipping_env: WorkflowEnvironment,
) -> None:
    """A sweep applies its batch a chunk at a time. A step refused for good after the scan, while
    the first chunk is applied, is decided before the second chunk, not after the whole batch
    (under a backlog of cool-downs a batch takes seconds)."""
    policy = SupervisorPolicy(interval_s=60.0, max_interval_s=600.0, orphan_check_s=0, queue_check_s=0, apply_chunk=4)
    store = Backlog(size=12, per_sweep=100, policy=policy, permanent=False)
    queue = f"sup-chunks-{uuid.uuid4().hex[:8]}"
    client = skipping_env.client
    workflow_id = f"sup-{queue}"
    applies: list[list[str]] = []

    @activity.defn(name="supervisor.apply")
    async def apply_then_a_refusal(request: ApplyInput) -> ApplyResult:
        applies.append([d.task_id for d in request.decisions])
        result = await store.apply(request)
        if len(applies) == 1:  # another task's step is refused for good now, after the scan
            store.due.append("refused")
            store.refused.add("refused")
            await client.get_workflow_handle(workflow_id).signal("wake")
        return result

    async with Worker(
        client, task_queue=queue, workflows=[SupervisorWorkflow], activities=[store.scan, apply_then_a_refusal]
    ):
        handle = await client.start_workflow("SupervisorWorkflow", SupervisorInput(), id=workflow_id, task_queue=queue)
        for _ in range(5):
            if any(t == "refused" for t, _, _ in store.decided):
                break
            await skipping_env.sleep(1)
        await handle.terminate("done")
        if os.environ.get("SAS_RECORD_HISTORIES") == "1":
            history = await handle.fetch_history()
            (HISTORIES / "supervisor_refusal_between_chunks.json").write_text(
                json.dumps(json.loads(history.to_json()), indent=1) + "\n"
            )

    assert applies[:4] == [["t0", "t1", "t2", "t3"], ["refused"], ["t4", "t5", "t6", "t7"], ["t8", "t9", "t10", "t11"]]
