"""A benchmark worker process.

``python -m bench._worker bench --task-queue Q``: the bench-only workflows (bare, (a), (c)), as a
plain Temporal worker runs them; with ``--lean``, with the two process-level savings sas's
``worker.py`` makes (its sandbox runner, workflows/runner.py, and ``gc.freeze()`` after start-up).
``python -m bench._worker sas-variant [--search-attributes on|off]``: sas's own worker code
(``worker.py``) with the search-attribute upserts off (default), on ``SAS_TEMPORAL__TASK_QUEUE``.
Both log "worker ... polling" when ready, like ``worker.py``."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _limits(settings):  # type: ignore[no-untyped-def]
    """The same pool to the remote services as sas's worker.py, so the designs differ only in their mirror."""
    import httpx

    pool = settings.services.max_connections
    return httpx.Limits(max_connections=pool, max_keepalive_connections=pool)


async def run_bench(task_queue: str, mirror: bool, lean: bool = False, service_queues: bool = False) -> None:
    import httpx
    from temporalio.worker import Worker

    from bench._activities import BenchActivities
    from bench._workflows import BENCH_WORKFLOWS, SERVICE
    from sas import state_store
    from sas.runtime.connect import connect, worker_identity
    from sas.runtime.entry import serve_until_signalled
    from sas.runtime.task_workers import TaskWorkers
    from sas.settings import get_settings
    from sas.state_store.agent_writes import make_step_writer
    from sas.task_models.activity_defs import activity_name
    from sas.task_models.queues import service_queue

    settings = get_settings()
    engine = state_store.create_engine(settings.database) if mirror else None
    client = await connect(settings.temporal, "bench-worker")
    identity = worker_identity(settings.temporal, "bench-worker")
    async with httpx.AsyncClient(limits=_limits(settings)) as http:
        acts = BenchActivities(
            http,
            settings.services.url,
            state_store.session_factory(engine) if engine else None,
            identity,
            task_queue,
            make_step_writer(settings.database) if mirror else None,
        )
        from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

        from sas.workflows.runner import workflow_runner

        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=BENCH_WORKFLOWS,
            activities=acts.all(),
            identity=identity,
            workflow_runner=workflow_runner() if lean else SandboxedWorkflowRunner(),
        )
        workers = [worker]
        if service_queues:  # one worker per service queue, as sas's build_task_workers runs them
            for name, service in SERVICE.items():
                agent = next(a for a in acts.all() if activity_name(a) == name)
                workers.append(
                    Worker(client, task_queue=service_queue(task_queue, service), activities=[agent], identity=identity)
                )
        if lean:
            gc.freeze()  # as worker.py does
        print(f"worker {identity} polling {task_queue}", file=sys.stderr, flush=True)
        await serve_until_signalled(TaskWorkers(workers))


async def run_sas_variant(search_attributes: bool) -> None:
    """sas's own worker (``worker.py``), with the search-attribute upserts on or off."""
    from sas import state_store
    from sas.activities import build_activities, service_breakers, service_callers
    from sas.runtime.connect import connect, worker_identity
    from sas.runtime.entry import serve_until_signalled
    from sas.runtime.task_workers import build_task_workers
    from sas.settings import get_settings
    from sas.state_store.agent_writes import make_step_writer
    from sas.workflows import ALL_WORKFLOWS
    from sas.workflows.runner import workflow_runner

    settings = get_settings()
    engine = state_store.create_engine(settings.database)
    sessions = state_store.session_factory(engine)
    client = await connect(settings.temporal, "worker")
    identity = worker_identity(settings.temporal, "worker")
    writer = make_step_writer(settings.database)
    try:
        async with (
            service_breakers(settings.services, identity, sessions) as breakers,
            service_callers(
                settings.services, breakers=breakers, workflow_queue=settings.temporal.task_queue
            ) as remotes,  # the same pools as worker.py
        ):
            workers = build_task_workers(
                client,
                settings,
                build_activities(
                    settings, remotes, sessions, identity, search_attributes=search_attributes, step_writer=writer
                ),
                workflows=ALL_WORKFLOWS,
                identity=identity,
                breakers=breakers,
                workflow_runner=workflow_runner(),
            )
            print(f"worker {identity} polling {settings.temporal.task_queue}", file=sys.stderr, flush=True)
            await serve_until_signalled(workers)
    finally:
        await writer.aclose()


def main() -> None:
    from sas.runtime.entry import run_entry

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("kind", choices=["bench", "sas-variant"])
    parser.add_argument("--search-attributes", choices=["on", "off"], default="off")
    parser.add_argument("--task-queue", default="bench-bare")
    parser.add_argument("--no-mirror", action="store_true", help="no state store (bare workflows only)")
    parser.add_argument(
        "--lean", action="store_true", help="sas's sandbox runner and gc.freeze(), as in worker.py (bench workflows)"
    )
    parser.add_argument(
        "--service-queues", action="store_true", help="also a worker per service queue (<task queue>.<service>)"
    )
    args = parser.parse_args()
    if args.kind == "bench":
        run_entry(lambda: run_bench(args.task_queue, not args.no_mirror, args.lean, args.service_queues))
    else:
        run_entry(lambda: run_sas_variant(args.search_attributes == "on"))


if __name__ == "__main__":
    main()
