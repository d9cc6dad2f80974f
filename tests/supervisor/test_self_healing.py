"""A Supervisor workflow closed while its workers run is started again by them, and ``sas health
supervisor`` fails while it is down: against a real dev server, with the Supervisor worker as a
deployment runs it (``python -m sas.supervisor``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from sas.settings import Settings, SupervisorSettings, TemporalSettings
from sas.supervisor.run.keeper import restart_closed_supervisors
from sas.supervisor.run.worker import ensure_supervisor_running
from sas_demo_services.launcher import ServiceProcess
from tests.helpers import fresh_id, wait_until
from tests.stack import migrated, start_stack
from tests.test_health_cmd import sas_health, until_healthy

ROOT = Path(__file__).resolve().parents[2]


def spawn_supervisor(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "sas.supervisor"], cwd=ROOT, env=env, stdout=log, stderr=log)


@asynccontextmanager
async def supervisor_process(env: dict[str, str], log_path: Path) -> AsyncIterator[subprocess.Popen[bytes]]:
    process = spawn_supervisor(env, log_path)
    try:
        yield process
    finally:
        process.kill()
        process.wait(30)


async def running_run(client: Client, workflow_id: str) -> str | None:
    described = await client.get_workflow_handle(workflow_id).describe()
    return described.run_id if described.status == WorkflowExecutionStatus.RUNNING else None


async def test_a_terminated_supervisor_workflow_is_started_again_by_its_worker(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str, tmp_path: Path
) -> None:
    workflow_id = fresh_id("sup-heal")
    await migrated(sqlite_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")} | {
        "SAS_TEMPORAL__ADDRESS": temporal_address,
        "SAS_TEMPORAL__TASK_QUEUE": fresh_id("tasks"),
        "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": fresh_id("sup-q"),
        "SAS_DATABASE__URL": sqlite_url,
        "SAS_SERVICES__URL": services.url,
        "SAS_SUPERVISOR__WORKFLOW_ID": workflow_id,
        "SAS_SUPERVISOR__KEEP_RUNNING_S": "0.5",
    }
    log_path = tmp_path / "supervisor.log"
    try:
        async with supervisor_process(env, log_path):
            first = await wait_until(
                lambda: _maybe_running(client, workflow_id), timeout=60, what="the Supervisor workflow"
            )
            await client.get_workflow_handle(workflow_id).terminate("an operator's mistake")
            again = await wait_until(
                lambda: _maybe_running(client, workflow_id),
                lambda run: run is not None and run != first,
                timeout=60,
                what="a new run of the terminated Supervisor",
            )
    finally:
        await _terminate(client, workflow_id)  # its worker is gone: nothing starts it again
    assert again != first
    assert f"Supervisor workflow {workflow_id} was TERMINATED: started it again" in log_path.read_text()


async def test_health_fails_while_the_supervisor_workflow_is_closed(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> None:
    async with start_stack(client, temporal_address, services.url, sqlite_url) as stack:
        settings = stack.settings
        env = {
            "SAS_TEMPORAL__ADDRESS": temporal_address,
            "SAS_TEMPORAL__SUPERVISOR_TASK_QUEUE": settings.temporal.supervisor_task_queue,
            "SAS_SUPERVISOR__WORKFLOW_ID": settings.supervisor.workflow_id,
            "SAS_TEMPORAL__IDENTITY": "test-supervisor",  # tests/stack.py's Supervisor worker
        }
        healthy = await until_healthy(["supervisor"], env)
        await client.get_workflow_handle(settings.supervisor.workflow_id).terminate("an operator's mistake")
        down = await sas_health("supervisor", env=env)
        # Started again (as its worker's keeper would): healthy again, and the stack's clean-up finds it.
        await ensure_supervisor_running(client, settings)
        back = await until_healthy(["supervisor"], env)
    assert healthy.code == 0, healthy.err
    assert down.code == 1, down.out
    assert f"unhealthy: Supervisor workflow {settings.supervisor.workflow_id!r} is not running (TERMINATED)" in down.err
    assert "Traceback" not in down.err
    assert back.code == 0, back.err


async def test_two_workers_that_find_a_shard_closed_start_one_run_of_it(client: Client, temporal_address: str) -> None:
    """Every shard is checked, and the conflict policy, not luck, keeps it to one run per shard:
    a second start attaches to the first's run instead of terminating it or failing."""
    settings = Settings(
        temporal=TemporalSettings(address=temporal_address, supervisor_task_queue=fresh_id("sup-q")),
        supervisor=SupervisorSettings(workflow_id=fresh_id("sup-race"), shards=2),
    )
    ids = [settings.supervisor.shard_workflow_id(shard) for shard in range(2)]
    try:
        await ensure_supervisor_running(client, settings)  # no worker polls: the runs only have to exist
        for workflow_id in ids:
            await client.get_workflow_handle(workflow_id).terminate("an operator's mistake")
        # Two Supervisor workers' keepers find both shards closed at the same moment.
        both = await asyncio.gather(*(restart_closed_supervisors(client, settings) for _ in range(2)))
        runs = {
            workflow_id: await wait_until(
                lambda workflow_id=workflow_id: _statuses(client, workflow_id),  # type: ignore[misc]
                lambda statuses: len(statuses) >= 2,
                timeout=30,
                what=f"both runs of {workflow_id} in visibility",
            )
            for workflow_id in ids
        }
    finally:
        for workflow_id in ids:
            await _terminate(client, workflow_id)
    # Each shard was found closed by one keeper or both (a keeper that looks after the other's start
    # finds it running); either way, one new run per shard.
    assert set(both[0] + both[1]) == set(ids)
    for workflow_id in ids:
        assert sorted(runs[workflow_id]) == ["RUNNING", "TERMINATED"], runs


async def _statuses(client: Client, workflow_id: str) -> list[str]:
    return [w.status.name async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'") if w.status is not None]


async def _maybe_running(client: Client, workflow_id: str) -> str | None:
    from temporalio.service import RPCError

    try:
        return await running_run(client, workflow_id)
    except RPCError:
        return None  # not started yet


async def _terminate(client: Client, workflow_id: str) -> None:
    from temporalio.service import RPCError

    try:
        await client.get_workflow_handle(workflow_id).terminate("test over")
    except RPCError:
        pass
