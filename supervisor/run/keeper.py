"""Keeps the Supervisor workflow of every shard running: started when a Supervisor worker starts,
and started again whenever a worker finds it closed (terminated, cancelled, timed out, failed).

Every Supervisor worker checks on a timer, not only at its start: a Supervisor workflow closed
while its workers run - an operator's terminate, a batch operation whose query caught it - would
otherwise stay closed while the workers poll an empty queue. Temporal decides who starts it: the
start asks for the shard's fixed id with ``USE_EXISTING``, so when several workers find it closed
at once, the server starts one run and the others attach to it.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from sas.runtime.liveness import workflow_status
from sas.settings import Settings
from sas.supervisor.models import SupervisorInput

log = logging.getLogger("sas.supervisor")


async def ensure_supervisor_running(client: Client, settings: Settings) -> None:
    """Start the Supervisor workflow of every shard, or attach to the ones already running.

    Workflow-id uniqueness is what makes "one Supervisor per shard": every worker
    process calls this, and all but the first find it running."""
    for shard in range(settings.supervisor.shards):
        await _start(client, settings, shard)


async def restart_closed_supervisors(client: Client, settings: Settings) -> list[str]:
    """Start again the shards' Supervisor workflows that are closed or missing; their ids."""
    restarted = []
    for shard in range(settings.supervisor.shards):
        workflow_id = settings.supervisor.shard_workflow_id(shard)
        status = await workflow_status(client, workflow_id)
        if status == "RUNNING":
            continue
        handle = await _start(client, settings, shard)
        # Another worker may have started it a moment before: then this one attached to that run.
        log.warning("Supervisor workflow %s was %s: started it again (run %s)", workflow_id, status, handle.run_id)
        restarted.append(workflow_id)
    return restarted


class SupervisorKeeper:
    """While entered (``serve_until_signalled`` runs it beside the worker): every
    ``settings.supervisor.keep_running_s``, start again any shard's Supervisor that closed."""

    def __init__(self, client: Client, settings: Settings) -> None:
        self._client = client
        self._settings = settings
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SupervisorKeeper:
        self._task = asyncio.create_task(self._keep(), name="supervisor-keeper")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _keep(self) -> None:
        while True:
            await asyncio.sleep(self._settings.supervisor.keep_running_s)
            try:
                await restart_closed_supervisors(self._client, self._settings)
            except RPCError as err:
                # Temporal unreachable for a moment: the next round asks again; the worker's own
                # polling reports an outage that lasts.
                log.warning("could not check the Supervisor workflows: %s", err.message)
            except Exception:  # the keeper must outlive one bad round (its traceback goes to the log)
                log.exception("could not check the Supervisor workflows")


async def _start(client: Client, settings: Settings, shard: int) -> WorkflowHandle[object, object]:
    sup = settings.supervisor
    return await client.start_workflow(
        "SupervisorWorkflow",  # its run takes the raw payload (workflows/inputs.py)
        SupervisorInput(shard=shard),
        id=sup.shard_workflow_id(shard),
        task_queue=settings.temporal.supervisor_task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # What the Temporal UI's list says of it; its current details say how the sweeps go.
        static_summary=(
            f"Supervisor shard {shard + 1}/{sup.shards} · sweeps every {sup.interval_s:g}-{sup.max_interval_s:g} s"
            f" · tasks on {settings.temporal.task_queue}"
        ),
        static_details=(
            f"**Supervisor** of shard {shard + 1} of {sup.shards}: scans the mirrored state table for steps "
            f"past their CompleteBy or Failed, asks Temporal before acting, and retries, compensates or parks "
            f"them (failure threshold {sup.failure_threshold}); raises operator alerts (`sas alerts`). "
            "Its current details show the last sweep, counts and open alerts."
        ),
    )
