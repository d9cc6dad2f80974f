"""The Scheduler + Agents worker: ``python worker.py`` (or ``sas worker``).

It migrates the state store, connects to Temporal and polls the task queue for
the task workflows and their Agents until SIGINT/SIGTERM. Then it stops polling and
lets the Agents' calls in flight finish (see ``graceful_shutdown``) before it exits.
"""

from __future__ import annotations

import gc
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from sas.runtime.entry import run_entry, serve_until_signalled
from sas.runtime.logs import configure_logging

if TYPE_CHECKING:
    from sas.settings import Settings


def graceful_shutdown(settings: Settings) -> timedelta:
    """How long a stopping worker lets its running activities finish before it cancels them: the
    longest complete-by, since Temporal times an attempt out then anyway. An attempt cancelled
    at that point fails and is retried on another worker, like any attempt of a lost worker."""
    policies = [settings.default_step, settings.compensation, *settings.steps.values()]
    return max(policy.complete_by for policy in policies)


async def run_worker() -> None:
    from temporalio.worker import Worker

    from sas import state_store
    from sas.activities import build_activities, check_service_names, service_callers
    from sas.activities.outbound import WebhookSender
    from sas.runtime.connect import connect, metrics_runtime, worker_identity
    from sas.runtime.failures import reaching_state_store
    from sas.runtime.otel import tracing
    from sas.runtime.search_attributes import missing_search_attributes
    from sas.settings import get_settings
    from sas.state_store.agent_writes import make_step_writer
    from sas.workflows import ALL_WORKFLOWS
    from sas.workflows.runner import workflow_runner

    settings = get_settings()
    check_service_names(settings.services)  # before anything connects: a misspelt service is a settings error
    configure_logging(settings.log_level)
    traces = tracing(settings.otel.enabled)  # before anything else: a missing extra is said at once
    with reaching_state_store(settings.database.url):
        await state_store.upgrade_async(settings.database.url)
    engine = state_store.create_engine(settings.database)
    client = await connect(
        settings.temporal,
        "worker",
        settings.encryption,
        runtime=metrics_runtime(settings.metrics.worker_bind),
        interceptors=traces.interceptors,
    )
    identity = worker_identity(settings.temporal, "worker")
    log = logging.getLogger("sas.worker")
    missing = await missing_search_attributes(client)
    if missing:
        # Upserting an unregistered attribute would fail every workflow task; run without them.
        log.warning(
            "search attributes %s are not registered: run `sas setup`; tasks will not be filterable in the UI", missing
        )
    writer = make_step_writer(settings.database)
    try:
        async with (
            # One pool and concurrency limit per remote service (bulkheads), traced; the
            # callbacks' pool is separate and not traced.
            service_callers(settings.services, traces.instrument_http) as remotes,
            WebhookSender(settings.outbound, settings.callbacks.secret) as callbacks,
        ):
            worker = Worker(
                client,
                task_queue=settings.temporal.task_queue,
                workflows=ALL_WORKFLOWS,
                activities=build_activities(
                    settings,
                    remotes,
                    state_store.session_factory(engine),
                    identity,
                    search_attributes=not missing,
                    step_writer=writer,
                    callback_sender=callbacks,
                ),
                identity=identity,
                workflow_runner=workflow_runner(),
                graceful_shutdown_timeout=graceful_shutdown(settings),
            )
            log.info("worker %s polling %s at %s", identity, settings.temporal.task_queue, settings.temporal.address)
            # Everything loaded so far lives as long as the process: keep it out of the
            # collector's scans, which otherwise walk it again on every full collection
            # (the sandbox allocates a lot per workflow run, so full collections are frequent).
            gc.freeze()
            await serve_until_signalled(worker)
    finally:
        await writer.aclose()
        await engine.dispose()
        traces.shutdown()


def main() -> None:
    run_entry(run_worker)


if __name__ == "__main__":
    main()
