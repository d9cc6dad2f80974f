"""The Supervisor's worker process: polls the Supervisor queue and keeps the Supervisor
workflow running (``supervisor/run/keeper.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from temporalio.client import Client
from temporalio.worker import Worker

from sas.runtime.activity_owners import OwnedActivities, Owners
from sas.runtime.connect import connect, metrics_runtime, worker_identity
from sas.runtime.entry import serve_until_signalled
from sas.runtime.failures import reaching_state_store
from sas.runtime.logs import configure_logging
from sas.runtime.versioning import SUPERVISOR, deployment_config
from sas.settings import Settings, get_settings
from sas.supervisor.act import ApplyActivities, Outbox
from sas.supervisor.alert import AlertDeliveryActivities
from sas.supervisor.detect import OrphanActivities, QueueActivities, ScanActivities
from sas.supervisor.run.keeper import SupervisorKeeper, ensure_supervisor_running
from sas.supervisor.run.workflow import SupervisorWorkflow
from sas.workflows.runner import workflow_runner

__all__ = ["build_worker", "ensure_supervisor_running", "run_supervisor", "supervisor_activities"]

log = logging.getLogger("sas.supervisor")

_STICKY = timedelta(seconds=3)


def supervisor_activities(
    client: Client, settings: Settings, sessions: async_sessionmaker[AsyncSession], identity: str
) -> list[Callable[..., Any]]:
    """Every activity the Supervisor worker registers, one class per role, dependencies injected.

    Each implements a declaration of ``supervisor/activity_defs.py``, through which the workflow calls it."""
    outbox = Outbox(sessions, client, settings)
    return [
        ScanActivities(sessions, settings).scan,
        ApplyActivities(sessions, client, settings, identity, outbox).apply,
        OrphanActivities(sessions, client, settings, identity, outbox).check_orphans,
        QueueActivities(sessions, client, settings).check_queues,
        AlertDeliveryActivities(sessions, settings).deliver_alerts,
    ]


def build_worker(
    client: Client, settings: Settings, sessions: async_sessionmaker[AsyncSession], identity: str
) -> Worker:
    # With Worker Versioning on, the Supervisor auto-upgrades (sas/runtime/versioning.py).
    versioned = deployment_config(settings.worker, SUPERVISOR)
    return Worker(
        client,
        task_queue=settings.temporal.supervisor_task_queue,
        workflows=[SupervisorWorkflow],
        activities=supervisor_activities(client, settings, sessions, identity),
        identity=identity,
        workflow_runner=workflow_runner(),
        # Its activities run for the Supervisor workflow alone: a standalone `supervisor.apply`
        # could claim and send any decision it was given.
        interceptors=[OwnedActivities(Owners(agents_of={}, undos=frozenset()))],
        deployment_config=versioned,
        # A stopped Supervisor's sticky queue holds its next workflow task this long before any
        # worker may take it (the SDK's default is 10 s): a restart sweeps within its interval.
        sticky_queue_schedule_to_start_timeout=_STICKY,
    )


async def run_supervisor() -> None:
    from sas import state_store

    settings = get_settings()
    configure_logging(settings.log_level)
    with reaching_state_store(settings.database.url):
        await state_store.upgrade_async(settings.database.url)
    engine = state_store.create_engine(settings.database)
    try:
        client = await connect(
            settings.temporal,
            "supervisor",
            settings.encryption,
            runtime=metrics_runtime(settings.metrics.supervisor_bind),
        )
        identity = worker_identity(settings.temporal, "supervisor")
        worker = build_worker(client, settings, state_store.session_factory(engine), identity)
        await ensure_supervisor_running(client, settings)
        log.info("supervisor %s polling %s", identity, settings.temporal.supervisor_task_queue)
        # The keeper starts the Supervisor workflow again if it closes while this worker runs.
        await serve_until_signalled(worker, SupervisorKeeper(client, settings))
    finally:
        await engine.dispose()
