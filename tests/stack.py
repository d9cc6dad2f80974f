"""One test's running system: a task worker and a Supervisor worker on fresh queues,
over a fresh state store, against the session's Temporal server and remote services."""

from __future__ import annotations

import base64
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from sas import state_store, workflows
from sas.activities import Breakers, build_activities, service_breakers, service_callers
from sas.activities.outbound import WebhookSender
from sas.runtime.task_workers import build_task_workers
from sas.settings import (
    CallbackSettings,
    DatabaseSettings,
    ServicesSettings,
    Settings,
    SupervisorSettings,
    TemporalSettings,
)
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.migrate import create_private
from sas.state_store.queries import TaskRecord, alerts_for, decisions_for, get_task
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import StepPolicyValues, TaskResult
from sas.task_models.outbound import OutboundPolicy
from sas.workflows.runner import workflow_runner
from sas_orders.models import OrderInput
from tests.helpers import fresh_id

# A Standard Webhooks secret: whsec_ + base64 of 32 bytes (fixed, so a failure is reproducible).
CALLBACK_SECRET = "whsec_" + base64.b64encode(b"test-callback-secret-32-bytes!!!").decode()
# The session's remote services take this token on /admin (tests/conftest.py starts them with it).
ADMIN_TOKEN = "test-admin-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# The test receivers listen on plain http on loopback: the local development setting allows them.
DEV_OUTBOUND = OutboundPolicy(allow_http=True, allow_private=True)
FAST_STEP = StepPolicyValues(
    complete_by_s=2.0, heartbeat_s=1.5, max_attempts=2, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)
# For tests that count decisions exactly: a complete-by (and heartbeat) that no loaded machine
# reaches. With FAST_STEP an attempt that two test suites on two cores slow past 2 s times out,
# and the Supervisor rightly retries it: a correct decision the count did not expect.
STEADY_STEP = FAST_STEP.model_copy(update={"complete_by_s": 20.0, "heartbeat_s": 5.0})
FAST_UNDO = StepPolicyValues(complete_by_s=2.0, max_attempts=3, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5)


def test_settings(temporal_address: str, services_url: str, db_url: str, **overrides: Any) -> Settings:
    suffix = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "temporal": TemporalSettings(
            address=temporal_address, task_queue=f"tasks-{suffix}", supervisor_task_queue=f"sup-{suffix}"
        ),
        "database": DatabaseSettings(url=db_url),
        "services": ServicesSettings(url=services_url, admin_token=ADMIN_TOKEN),
        "callbacks": CallbackSettings(secret=CALLBACK_SECRET),
        "outbound": DEV_OUTBOUND,
        "supervisor": SupervisorSettings(
            interval_s=0.5,
            failure_threshold=3,
            overdue_grace_s=1.5,
            cooldown_tries=0,  # the tests' ladder: retries, then the outcome, in seconds
            workflow_id=f"supervisor-{suffix}",
        ),
        "default_step": FAST_STEP,
        "compensation": FAST_UNDO,
    }
    values.update(overrides)
    return Settings(**values)


def order(**changes: Any) -> OrderInput:
    base: dict[str, Any] = {
        "customer_id": "cust-1",
        "sku": "SKU-1",
        "quantity": 2,
        "amount_cents": 1999,
        "address": "1 Test Street",
    }
    base.update(changes)
    return OrderInput(**base)


_MIGRATED_SQLITE: list[Path] = []  # this process's migrated template, made at its first use


async def migrated(db_url: str) -> None:
    """The state store at ``db_url`` upgraded to the newest revision. A new SQLite file starts as a
    copy of one this process migrated once: the upgrade is a score of transactions, each synced to
    disk, a second or more per test on a busy machine. Anything else is upgraded as every process
    of sas upgrades it (the migrations have tests of their own in tests/state_store)."""
    url = make_url(db_url)
    in_a_file = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    path = Path(url.database or "")
    if not in_a_file or path.exists():
        await state_store.upgrade_async(db_url)
        return
    if not _MIGRATED_SQLITE:
        template = Path(tempfile.mkdtemp(prefix="sas-test-template-")) / "state.db"
        await state_store.upgrade_async(f"{url.drivername}:///{template}")
        _MIGRATED_SQLITE.append(template)
    create_private(path)  # 0600, as the upgrade creates it
    shutil.copyfile(_MIGRATED_SQLITE[0], path)


def discard_migrated_template() -> None:
    """Remove this process's template (tests/conftest.py, at the end of the session)."""
    while _MIGRATED_SQLITE:
        shutil.rmtree(_MIGRATED_SQLITE.pop().parent, ignore_errors=True)


@dataclass
class Stack:
    client: Client
    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    services_url: str
    # The in-process worker's own breakers (None for a worker in another process): what its gate
    # and its callers go by, which follow the shared rows within each breaker's ``sync_s``.
    breakers: Breakers | None = None

    async def submit(
        self, task_id: str | None = None, payload: Any = None, workflow: str = "OrderWorkflow"
    ) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            workflow,
            payload if payload is not None else order(),
            id=task_id or fresh_id("order"),
            task_queue=self.settings.temporal.task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            result_type=TaskResult,
        )

    async def record(self, task_id: str) -> TaskRecord | None:
        async with self.sessions() as session:
            return await get_task(session, task_id)

    async def step_states(self, task_id: str) -> dict[str, str]:
        record = await self.record(task_id)
        return {} if record is None else {s.name: s.state for s in record.steps}

    async def task_state(self, task_id: str) -> str | None:
        record = await self.record(task_id)
        return None if record is None else record.task.state

    async def decisions(self, task_id: str) -> list[Any]:
        async with self.sessions() as session:
            return await decisions_for(session, task_id)

    async def alerts(self, task_id: str) -> list[Any]:
        async with self.sessions() as session:
            return await alerts_for(session, task_id)

    async def ledger(self, order_id: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as http:
            response = await http.get(f"{self.services_url}/ledger", params={"order_id": order_id})
            response.raise_for_status()
            return response.json()["entries"]

    async def add_fault(self, **rule: Any) -> str:
        async with httpx.AsyncClient() as http:
            response = await http.post(f"{self.services_url}/admin/faults", json=rule, headers=ADMIN_HEADERS)
            response.raise_for_status()
            return response.json()["id"]

    async def remove_fault(self, fault_id: str) -> None:
        async with httpx.AsyncClient() as http:
            response = await http.delete(f"{self.services_url}/admin/faults/{fault_id}", headers=ADMIN_HEADERS)
            response.raise_for_status()


@asynccontextmanager
async def start_stack(
    client: Client,
    temporal_address: str,
    services_url: str,
    db_url: str,
    supervisor: bool = True,
    instrument_http: Callable[[httpx.AsyncClient], None] | None = None,
    supervisor_settings: SupervisorSettings | None = None,
    worker_options: dict[str, Any] | None = None,
    identity: str = "test-worker",
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """``instrument_http`` is given each remote service's HTTP client before the worker starts (tracing).
    ``supervisor_settings`` replace the tests' fast ladder (``supervisor`` says whether one runs).
    ``worker_options`` go to the workflow queue's worker (``max_concurrent_activities``...); the
    services' workers take theirs from the settings, as ``worker.py``'s do."""
    if supervisor_settings is not None:
        overrides["supervisor"] = supervisor_settings
    settings = test_settings(temporal_address, services_url, db_url, **overrides)
    await migrated(db_url)
    engine = state_store.create_engine(settings.database)
    sessions = state_store.session_factory(engine)
    writer = make_step_writer(settings.database)
    try:
        async with (
            service_breakers(settings.services, identity, sessions) as breakers,
            service_callers(settings.services, instrument_http, breakers, settings.temporal.task_queue) as remotes,
            WebhookSender(settings.outbound, settings.callbacks.secret) as callbacks,
        ):
            task_worker = build_task_workers(
                client,
                settings,
                build_activities(settings, remotes, sessions, identity, step_writer=writer, callback_sender=callbacks),
                workflows=workflows.ALL_WORKFLOWS,  # read now: the registry may have grown (tests/test_task_type_registry.py)
                identity=identity,
                breakers=breakers,
                workflow_runner=workflow_runner(),
                **(worker_options or {}),
            )
            async with task_worker:
                if not supervisor:
                    yield Stack(client, settings, sessions, services_url, breakers)
                    return
                async with build_worker(client, settings, sessions, "test-supervisor"):
                    await ensure_supervisor_running(client, settings)
                    try:
                        yield Stack(client, settings, sessions, services_url, breakers)
                    finally:
                        await client.get_workflow_handle(settings.supervisor.workflow_id).terminate("test over")
    finally:
        await writer.aclose()
        await engine.dispose()


@asynccontextmanager
async def more_workers(
    stack: Stack, settings: Settings, identity: str, workflow_classes: list[type]
) -> AsyncIterator[Any]:
    """Another worker process's task workers beside the stack's (another build, other queues):
    its own breakers and service callers, the stack's client and state store."""
    async with (
        service_breakers(settings.services, identity, stack.sessions) as breakers,
        service_callers(settings.services, breakers=breakers, workflow_queue=settings.temporal.task_queue) as remotes,
        build_task_workers(
            stack.client,
            settings,
            build_activities(settings, remotes, stack.sessions, identity),
            workflows=workflow_classes,
            identity=identity,
            breakers=breakers,
            workflow_runner=workflow_runner(),
        ) as running,
    ):
        yield running
