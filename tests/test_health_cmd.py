"""``sas health worker|supervisor`` against a real Temporal dev server: healthy only while a
process of this host with the role's identity polls both kinds of task queue."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from sas_demo_services.launcher import free_port
from tests.helpers import fresh_id, wait_until

ROOT = Path(__file__).resolve().parents[1]


@workflow.defn(sandboxed=False)
class IdleWorkflow:
    @workflow.run
    async def run(self) -> None:
        return None


@activity.defn
async def idle_activity() -> None:
    return None


@dataclass
class Result:
    code: int
    out: str
    err: str


async def sas_health(*args: str, env: dict[str, str]) -> Result:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sas.cli.main",
        "health",
        *args,
        cwd=ROOT,
        env={**clean, "COLUMNS": "300", **env},  # wide enough that rich does not wrap a message
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return Result(process.returncode, out.decode(), err.decode())


@asynccontextmanager
async def polling(client: Client, queue: str, identity: str, activities: bool = True) -> AsyncIterator[None]:
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[IdleWorkflow],
        activities=[idle_activity] if activities else [],
        identity=identity,
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with worker:
        yield


def stack_env(temporal_address: str, queue: str, **extra: str) -> dict[str, str]:
    return {
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": queue,
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": queue,
        **extra,
    }


async def until_healthy(args: Sequence[str], env: dict[str, str]) -> Result:
    """The first polls reach Temporal a moment after the worker starts."""
    return await wait_until(
        lambda: sas_health(*args, env=env), lambda r: r.code == 0, timeout=30, interval=0.5, what="sas health"
    )


async def test_a_worker_of_this_host_that_polls_is_healthy(client: Client, temporal_address: str) -> None:
    queue = fresh_id("health-q")
    identity = f"worker-{os.getpid()}@{socket.gethostname()}"
    async with polling(client, queue, identity):
        result = await until_healthy(["worker"], stack_env(temporal_address, queue))
        # The same process is not a Supervisor: the role is part of the identity checked.
        as_supervisor = await sas_health("supervisor", env=stack_env(temporal_address, queue))
    assert result.code == 0, result.err
    assert f"healthy: {identity} polls {queue!r}" in result.out
    assert as_supervisor.code == 1
    assert f"unhealthy: no supervisor of host {socket.gethostname()}" in as_supervisor.err


async def test_a_poller_of_another_host_does_not_count(client: Client, temporal_address: str) -> None:
    queue = fresh_id("health-q")
    async with polling(client, queue, "worker-1@some-other-host"):
        env = stack_env(temporal_address, queue)
        # Wait until Temporal lists that poller, so the check below sees a queue that has one.
        seen = await until_healthy(["worker"], {**env, "SAS_TEMPORAL__IDENTITY": "worker-1@some-other-host"})
        assert seen.code == 0, seen.err
        result = await sas_health("worker", env=env)
    assert result.code == 1
    assert "unhealthy: no worker of host" in result.err
    assert "other pollers of" in result.err and "worker-1@some-other-host" in result.err
    assert "Traceback" not in result.err


async def test_a_worker_that_polls_no_activities_is_unhealthy(client: Client, temporal_address: str) -> None:
    queue = fresh_id("health-q")
    identity = f"worker-{os.getpid()}@{socket.gethostname()}"
    async with polling(client, queue, identity, activities=False):
        result = await sas_health("worker", env=stack_env(temporal_address, queue))
    assert result.code == 1
    assert "has polled the activity task queue" in result.err


async def test_an_empty_queue_is_unhealthy(temporal_address: str) -> None:
    result = await sas_health("supervisor", "--max-age-s", "30", env=stack_env(temporal_address, fresh_id("none")))
    assert result.code == 1
    assert "has polled the workflow and activity task queue" in result.err
    assert "in the last 30s" in result.err
    assert "other pollers of" in result.err and "none" in result.err


async def test_unreachable_temporal_is_one_line_and_exit_1() -> None:
    result = await sas_health("worker", env={"SAS_TEMPORAL__ADDRESS": f"127.0.0.1:{free_port()}"})
    assert result.code == 1
    assert "unhealthy: cannot reach Temporal at 127.0.0.1:" in result.err
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) == 1


async def test_bad_settings_are_named_not_echoed() -> None:
    result = await sas_health("worker", env={"SAS_ENCRYPTION__KEYS": '{"k1": "not-a-key-CANARY"}'})
    assert result.code == 2
    assert "invalid settings" in result.err and "SAS_ENCRYPTION__KEYS" in result.err
    assert "CANARY" not in result.err and "Traceback" not in result.err


async def test_a_supervisor_workflow_that_does_not_sweep_is_unhealthy(client: Client, temporal_address: str) -> None:
    """This host's Supervisor polls, and its workflow runs, but no sweep happens: here its worker
    knows no SupervisorWorkflow, so every workflow task fails and the run never scans."""
    queue = fresh_id("health-q")
    workflow_id = fresh_id("sup-stalled")
    identity = f"supervisor-{os.getpid()}@{socket.gethostname()}"
    env = stack_env(temporal_address, queue, SAS_SUPERVISOR__WORKFLOW_ID=workflow_id)
    await client.start_workflow("SupervisorWorkflow", id=workflow_id, task_queue=queue)
    try:
        async with polling(client, queue, identity):
            # Healthy at first: it polls, and a run just started counts as swept within the default bound.
            fresh = await until_healthy(["supervisor"], env)
            result = await wait_until(
                lambda: sas_health("supervisor", env={**env, "SAS_SUPERVISOR__SWEEP_BOUND_S": "1"}),
                lambda r: "has not swept" in r.err,
                timeout=30,
                interval=0.5,
                what="sas health to see no sweep",
            )
    finally:
        await client.get_workflow_handle(workflow_id).terminate("test over")
    assert fresh.code == 0, fresh.err
    assert result.code == 1
    assert f"unhealthy: Supervisor workflow {workflow_id!r} has not swept for" in result.err
    assert "(bound 1s)" in result.err and "Traceback" not in result.err
