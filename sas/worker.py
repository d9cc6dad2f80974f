"""The Scheduler + Agents worker: ``python worker.py`` at the repository root, ``sas worker`` or
``python -m sas.worker``.

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
    from sas import state_store
    from sas.activities import (
        build_activities,
        check_service_names,
        check_step_settings,
        service_breakers,
        service_callers,
    )
    from sas.activities.outbound import WebhookSender
    from sas.runtime.connect import connect, metrics_runtime, worker_identity
    from sas.runtime.failures import reaching_state_store
    from sas.runtime.otel import tracing
    from sas.runtime.search_attributes import missing_search_attributes
    from sas.runtime.task_workers import build_task_workers
    from sas.settings import get_settings
    from sas.state_store.agent_writes import make_step_writer
    from sas.workflows import ALL_WORKFLOWS
    from sas.workflows.runner import workflow_runner

    settings = get_settings()
    check_service_names(
        settings.services, settings.worker.queues
    )  # before anything connects: a misspelt service is a settings error
    check_step_settings(settings)
    configure_logging(settings.log_level)
    traces = tracing(settings.otel.enabled)  # before anything else: a missing extra is said at once
    with reaching_state_store(settings.database.url):
        await state_store.upgrade_async(settings.database.url)
    engine = state_store.create_engine(settings.database)
    runtime = metrics_runtime(settings.metrics.worker_bind)
    client = await connect(
        settings.temporal,
        "worker",
        settings.encryption,
        runtime=runtime,
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
    sessions = state_store.session_factory(engine)
    try:
        async with (
            # Each service's circuit breaker, shared with the other workers through the state store.
            service_breakers(
                settings.services, identity, sessions, runtime.metric_meter if runtime else None
            ) as breakers,
            # One pool and concurrency limit per remote service (bulkheads), traced; the
            # callbacks' pool is separate and not traced.
            service_callers(
                settings.services, traces.instrument_http, breakers, settings.temporal.task_queue
            ) as remotes,
            WebhookSender(settings.outbound, settings.callbacks.secret) as callbacks,
        ):
            # The workflow queue's worker, and one per service on its own queue.
            workers = build_task_workers(
                client,
                settings,
                build_activities(
                    settings,
                    remotes,
                    sessions,
                    identity,
                    search_attributes=not missing,
                    step_writer=writer,
                    callback_sender=callbacks,
                ),
                workflows=ALL_WORKFLOWS,
                identity=identity,
                breakers=breakers,
                workflow_runner=workflow_runner(),
                graceful_shutdown_timeout=graceful_shutdown(settings),
            )
            log.info(
                "worker %s polling %s at %s",
                identity,
                ", ".join(w.task_queue for w in workers.workers),
                settings.temporal.address,
            )
            # Everything loaded so far lives as long as the process: keep it out of the
            # collector's scans, which otherwise walk it again on every full collection
            # (the sandbox allocates a lot per workflow run, so full collections are frequent).
            gc.freeze()
            await serve_until_signalled(workers)
    finally:
        await writer.aclose()
        await engine.dispose()
        traces.shutdown()


def main() -> None:
    run_entry(run_worker)


if __name__ == "__main__":
    main()
