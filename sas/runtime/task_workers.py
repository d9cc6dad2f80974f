"""The task worker's Temporal workers: one on the workflow queue, and one per remote service on
that service's own queue (``task_models/queues.py``).

The workflow queue's worker runs the Scheduler workflows, their local activities, the callbacks,
and every Agent of a service without a queue of its own: Temporal hands it each such call with
the workflow task that scheduled it. Each service's worker runs that service's Agents planned on
its own queue, at most ``max_concurrency`` at a time, with Temporal's rate limit
``max_per_second`` on the queue (which keeps the backlog in Temporal; what the service is promised
is kept at each call, ``sas/breaker/rate_limit.py``), and behind the service's breaker gate (``sas/breaker/gate.py``):
it does not poll while the breaker holds. Every service's queue is served, whether or not its
settings ask for one now: a task planned under other settings (before a deploy, or by another
worker) still has its Agents served there, and a backlog, pollers and a rate limit per service
are Temporal's own (docs/operator.md, "Scaling workers per service").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import FixedSizeSlotSupplier, Worker, WorkerTuner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from sas.activities import Breakers, by_service
from sas.breaker.gate import BreakerGate
from sas.runtime.activity_owners import OwnedActivities, owners_of
from sas.runtime.versioning import TASKS, deployment_config
from sas.runtime.whole_calls import WholeCalls, task_types_of
from sas.settings import WORKFLOW_QUEUE, Settings
from sas.task_models import seals
from sas.task_models.queues import service_queue
from sas.workflows.shell.interceptors import workflow_interceptors

# The SDK's defaults, which a tuner replaces: it takes slot suppliers for every kind of task.
_WORKFLOW_SLOTS = 100
_LOCAL_ACTIVITY_SLOTS = 100
_NEXUS_SLOTS = 100
# The workflow queue's worker's activity slots for its own activities (the SDK's default), beside
# those of the services sharing its queue.
_OWN_ACTIVITY_SLOTS = 100


class TaskWorkers:
    """The workers one task-worker process runs, entered and left together like one ``Worker``."""

    def __init__(self, workers: Sequence[Worker]) -> None:
        self.workers = list(workers)
        self._entered: list[Worker] = []

    async def __aenter__(self) -> TaskWorkers:
        try:
            for worker in self.workers:
                await worker.__aenter__()
                self._entered.append(worker)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def shutdown(self) -> None:
        """Stop every worker (as ``Worker.shutdown``); leaving the context afterwards does nothing more."""
        while self._entered:
            await self._entered.pop().shutdown()

    async def __aexit__(self, *exc: Any) -> None:
        # The service workers first: their Agents' calls in flight finish within the graceful
        # shutdown, and the workflows that wait on them are still being served meanwhile.
        while self._entered:
            await self._entered.pop().__aexit__(None, None, None)


def build_task_workers(
    client: Client,
    settings: Settings,
    activities: list[Callable[..., Any]],
    *,
    workflows: Sequence[type],
    identity: str,
    breakers: Breakers,
    workflow_runner: SandboxedWorkflowRunner | None = None,
    graceful_shutdown_timeout: timedelta = timedelta(),
    **main_options: Any,
) -> TaskWorkers:
    """The workflow queue's worker (``main_options`` go to it) and one worker per service; only
    those ``SAS_WORKER__QUEUES`` names, if set."""
    queue = settings.temporal.task_queue
    wanted = settings.worker.queues
    options: dict[str, Any] = {"identity": identity, "graceful_shutdown_timeout": graceful_shutdown_timeout}
    # Every worker of the process declares the version, the services' too: a pinned task's Agents
    # run on its build (sas/runtime/versioning.py). None: unversioned.
    options["deployment_config"] = deployment_config(settings.worker, TASKS)
    if workflow_runner is not None:
        main_options["workflow_runner"] = workflow_runner
    # The process's Schedulers seal their calls and its Agents their results with the same keys
    # as every other worker of the deployment (sas.task_models.seals).
    seals.install(settings.seal.secrets() or [seals.derived_key(settings.database.url)])
    # Every worker refuses an activity its workflow does not own (a standalone one, a forward
    # call named as a clean-up's undo, a call no Scheduler of sas sealed): only sas starts sas's work.
    owned = OwnedActivities(owners_of(workflows), accept_unsealed=settings.seal.accept_unsealed_calls)
    # An Agent's call carries the input its submitter gave, and in a compact call no names
    # Temporal already gives: its Agent reads it whole. Filled in before the seal is checked,
    # which was made over the whole call.
    whole = WholeCalls(task_types_of(workflows))
    agents_by_service = by_service(activities)
    if "tuner" not in main_options:
        # The workflow queue's worker also runs the Agents of every service sharing its queue:
        # room for each one's calls in flight beside its own activities, so a hung service holds
        # no more than its share (a call finding its service's slots busy is refused, to wait in
        # the service's own queue: activities/remote.py).
        shared = sum(
            settings.services.service(name).max_concurrency
            for name, agents in agents_by_service.items()
            if agents and not settings.services.has_own_queue(name)
        )
        main_options.setdefault("max_concurrent_activities", _OWN_ACTIVITY_SLOTS + shared)
    workers = []
    if wanted is None or WORKFLOW_QUEUE in wanted:
        workers.append(
            Worker(
                client,
                task_queue=queue,
                workflows=workflows,
                activities=activities,
                interceptors=[*workflow_interceptors(), whole, owned],
                **options,
                **main_options,
            )
        )
    for name, agents in agents_by_service.items():
        if not agents or (wanted is not None and name not in wanted):
            continue
        service = settings.services.service(name)
        tuner = WorkerTuner.create_composite(
            workflow_supplier=FixedSizeSlotSupplier(_WORKFLOW_SLOTS),
            activity_supplier=BreakerGate(breakers[name], service.max_concurrency),
            local_activity_supplier=FixedSizeSlotSupplier(_LOCAL_ACTIVITY_SLOTS),
            nexus_supplier=FixedSizeSlotSupplier(_NEXUS_SLOTS),
        )
        workers.append(
            Worker(
                client,
                task_queue=service_queue(queue, name),
                activities=agents,
                tuner=tuner,
                max_concurrent_activity_task_polls=service.pollers,
                # Dispatch paced near the limit, so that calls wait in Temporal's queue rather
                # than in a worker's slots for the shared permits (sas/breaker/rate_limit.py).
                max_task_queue_activities_per_second=service.max_per_second,
                interceptors=[whole, owned],
                **options,
            )
        )
    return TaskWorkers(workers)
