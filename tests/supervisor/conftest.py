"""A running system whose parts a test can stop and start: the task worker, and one or
more Supervisor workers (and Supervisor workflows) over the same state store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest_asyncio
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Worker

from sas import state_store
from sas.activities import build_activities, service_breakers
from sas.runtime.task_workers import TaskWorkers, build_task_workers
from sas.settings import ServicesSettings, Settings, SupervisorSettings
from sas.state_store.agent_writes import make_step_writer
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import StepPolicyValues
from sas.workflows import ALL_WORKFLOWS
from sas.workflows.runner import workflow_runner
from tests.stack import ADMIN_TOKEN, STEADY_STEP, Stack, migrated, test_settings


@dataclass
class Rig(Stack):
    """A Stack whose task worker and Supervisors the test controls."""

    http: httpx.AsyncClient | None = None
    task_worker: TaskWorkers | None = None
    exits: AsyncExitStack = field(default_factory=AsyncExitStack)
    supervisor_ids: list[str] = field(default_factory=list)
    supervisors: dict[str, Worker] = field(default_factory=dict)
    extra_workflows: list[type] = field(default_factory=list)  # task types a test declares itself

    async def start_task_worker(self) -> None:
        assert self.http is not None
        writer = make_step_writer(self.settings.database)
        self.exits.push_async_callback(writer.aclose)
        self.task_worker = build_task_workers(
            self.client,
            self.settings,
            build_activities(self.settings, self.http, self.sessions, "rig-worker", step_writer=writer),
            workflows=[*ALL_WORKFLOWS, *self.extra_workflows],
            identity="rig-worker",
            breakers=service_breakers(self.settings.services, "rig-worker", None),  # no breaker in these rigs
            workflow_runner=workflow_runner(),
        )
        await self.exits.enter_async_context(self.task_worker)

    async def stop_task_worker(self) -> None:
        assert self.task_worker is not None
        await self.task_worker.shutdown()

    async def start_supervisor(self, identity: str, workflow_id: str | None = None) -> Worker:
        """A Supervisor worker; with ``workflow_id``, also a Supervisor workflow of that id
        (one per shard when ``shards`` > 1)."""
        settings = self.settings
        if workflow_id is not None:
            settings = settings.model_copy(
                update={"supervisor": settings.supervisor.model_copy(update={"workflow_id": workflow_id})}
            )
        # The SDK allows one worker per task queue per client: each Supervisor worker gets its own
        # connection (and runtime), as a separate Supervisor process would.
        client = await Client.connect(
            self.settings.temporal.address,
            namespace=self.client.namespace,
            data_converter=self.client.data_converter,
            runtime=Runtime(telemetry=TelemetryConfig()),
        )
        worker = await self.exits.enter_async_context(build_worker(client, settings, self.sessions, identity))
        self.supervisors[identity] = worker
        if workflow_id is not None:
            await ensure_supervisor_running(self.client, settings)
            for shard in range(settings.supervisor.shards):
                self.supervisor_ids.append(settings.supervisor.shard_workflow_id(shard))
        return worker

    async def stop_supervisor(self, identity: str) -> None:
        """Stop a Supervisor worker at once: its running activities are cancelled wherever they are."""
        await self.supervisors.pop(identity).shutdown()


def rig_settings(base: Settings, **supervisor: Any) -> Settings:
    values = {
        "interval_s": 0.3,
        "max_interval_s": 1.0,
        "failure_threshold": 3,
        "overdue_grace_s": 1.0,
        "retry_delay_s": 0.3,
        "orphan_after_s": 1.0,
        "orphan_check_s": 0.5,
        "queue_check_s": 0.5,
        "queue_idle_after_s": 1.0,
        "cooldown_tries": 0,  # the tests' ladder: retries, then the outcome, in seconds
        "workflow_id": base.supervisor.workflow_id,
    }
    values.update(supervisor)
    return base.model_copy(update={"supervisor": SupervisorSettings(**values)})


@pytest_asyncio.fixture
async def make_rig(client: Client, temporal_address: str, services, db_url: str) -> AsyncIterator[Any]:  # type: ignore[no-untyped-def]
    """``await make_rig(**supervisor_settings)``: a Rig on both databases, task worker running, no Supervisor yet.

    Its steps' complete-by is STEADY_STEP's, so a loaded machine never times an attempt out and
    every decision a test counts comes from the faults it set; a test of hung calls passes
    ``step=FAST_STEP``, whose complete-by it waits out."""
    rigs: list[Rig] = []
    engines = []

    async def make(
        extra_workflows: list[type] | None = None,
        step: StepPolicyValues = STEADY_STEP,
        own_queues: bool = False,
        **supervisor: Any,
    ) -> Rig:
        # own_queues: every service's Agents on its own task queue (task_models/queues.py).
        registry = ServicesSettings(url=services.url, admin_token=ADMIN_TOKEN, own_queues=own_queues)
        base = test_settings(temporal_address, services.url, db_url, default_step=step, services=registry)
        settings = rig_settings(base, **supervisor)
        await migrated(db_url)
        engine = state_store.create_engine(settings.database)
        engines.append(engine)
        rig = Rig(client, settings, state_store.session_factory(engine), services.url)
        rig.extra_workflows = list(extra_workflows or [])
        rig.http = await rig.exits.enter_async_context(httpx.AsyncClient())
        await rig.start_task_worker()
        rigs.append(rig)
        return rig

    try:
        yield make
    finally:
        for rig in rigs:
            for workflow_id in rig.supervisor_ids:
                try:
                    await client.get_workflow_handle(workflow_id).terminate("test over")
                except Exception:  # noqa: BLE001 - already gone
                    pass
            await rig.exits.aclose()
        for engine in engines:
            await engine.dispose()
