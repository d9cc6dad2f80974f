"""A driver program that uses ``TaskClient`` (``async with``, then ``run_driver``) exits 0 every
time: run 50 times, one after another, against one dev server and one worker, each waiting for
one small order and printing how it ended. Without ``run_driver`` such a program printed its result and
then, now and then, aborted in temporalio's Rust bridge at interpreter exit (exit 134)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from sas.api.client import TaskClient
from sas.client.errors import Unreachable
from tests.helpers import fresh_id
from tests.stack import Stack, order, start_stack

DRIVER = Path(__file__).with_name("driver_program.py")
RUNS = 50


@pytest_asyncio.fixture
async def one_stack(client: Client, temporal_address: str, services: object, sqlite_url: str) -> AsyncIterator[Stack]:
    async with start_stack(client, temporal_address, services.url, sqlite_url, supervisor=False) as running:  # type: ignore[attr-defined]
        yield running


def driver_env(stack: Stack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAS_")}
    settings = stack.settings
    env |= {
        "SAS_TEMPORAL__ADDRESS": settings.temporal.address,
        "SAS_TEMPORAL__TASK_QUEUE": settings.temporal.task_queue,
        "SAS_DATABASE__URL": settings.database.url,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    return env


# Fifty interpreters started one after another on a shared two-core machine: a few seconds each.
@pytest.mark.timeout(900)
async def test_a_driver_using_the_task_client_exits_0_every_time(one_stack: Stack) -> None:
    env = driver_env(one_stack)
    for run in range(RUNS):
        task_id = fresh_id("driver")
        await one_stack.submit(task_id, order(quantity=1, amount_cents=100))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(DRIVER),
            task_id,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
        assert (process.returncode, out.decode().strip()) == (0, "Processed"), f"run {run + 1}: {err.decode()[-2000:]}"


async def test_a_closed_client_says_so_and_leaves_a_given_connection_open(one_stack: Stack) -> None:
    async with TaskClient(one_stack.client, one_stack.settings) as given:
        assert given.temporal is one_stack.client
    assert given.closed
    with pytest.raises(Unreachable, match="this TaskClient is closed"):
        await given.status("any-task")
    # The Temporal client it was given is still its giver's, and still works.
    await one_stack.client.count_workflows()
    await given.close()  # closing twice is harmless
