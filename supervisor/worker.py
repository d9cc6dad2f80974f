"""The Supervisor's worker process: polls the Supervisor queue and makes sure the
Supervisor workflow is running."""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Worker

from sas_runtime.connect import connect, metrics_runtime, worker_identity
from sas_runtime.entry import serve_until_signalled
from sas_runtime.failures import reaching_state_store
from sas_runtime.logs import configure_logging
from settings import Settings, get_settings
from supervisor.activities import SupervisorActivities
from supervisor.models import SupervisorInput
from supervisor.workflow import SupervisorWorkflow
from workflows.runner import workflow_runner

log = logging.getLogger("sas.supervisor")


def build_worker(client: Client, settings: Settings, sessions, identity: str) -> Worker:  # type: ignore[no-untyped-def]
    acts = SupervisorActivities(sessions, client, settings, identity)
    return Worker(
        client,
        task_queue=settings.temporal.supervisor_task_queue,
        workflows=[SupervisorWorkflow],
        activities=[acts.scan, acts.apply, acts.check_orphans, acts.check_queues, acts.deliver_alerts],
        identity=identity,
        workflow_runner=workflow_runner(),
    )


async def ensure_supervisor_running(client: Client, settings: Settings) -> None:
    """Start the Supervisor workflow of every shard, or attach to the ones already running.

    Workflow-id uniqueness is what makes "one Supervisor per shard": every worker
    process calls this, and all but the first find it running."""
    for shard in range(settings.supervisor.shards):
        await client.start_workflow(
            "SupervisorWorkflow",  # its run takes the raw payload (workflows/inputs.py)
            SupervisorInput(shard=shard),
            id=settings.supervisor.shard_workflow_id(shard),
            task_queue=settings.temporal.supervisor_task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )


async def run_supervisor() -> None:
    import state_store

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
        await serve_until_signalled(worker)
    finally:
        await engine.dispose()
