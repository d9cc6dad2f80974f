"""A service sharing the workflow's queue keeps its bulkhead there: of calls started together, no
more than its slots go out, and the rest are refused at once (``SLOTS_FULL``) to wait in the
service's own queue, never queued in the shared worker (activities/remote.py). A service on
loopback that takes connections and never answers."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest_asyncio
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sas.activities.remote import RemoteCaller
from sas.activities.remote_answers import TRANSIENT
from sas.task_models.queues import SLOTS_FULL
from tests.helpers import wait_until


class HungService:
    """Takes connections and never answers, until its connections are dropped."""

    def __init__(self) -> None:
        self.connections: list[asyncio.StreamWriter] = []
        self.url = ""

    async def never_answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.append(writer)
        await reader.read()  # until the caller goes away

    def drop_connections(self) -> None:
        for writer in self.connections:
            writer.close()


@pytest_asyncio.fixture
async def hung_service() -> AsyncIterator[HungService]:
    service = HungService()
    server = await asyncio.start_server(service.never_answer, "127.0.0.1", 0)
    service.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield service
    finally:
        service.drop_connections()
        server.close()


async def test_calls_started_together_on_a_shared_queue_take_no_more_than_the_slots(
    hung_service: HungService,
) -> None:
    async with httpx.AsyncClient() as client:
        caller = RemoteCaller(
            client, hung_service.url, max_concurrency=2, timeout_s=30, service="shipping", own_queue="tasks.shipping"
        )

        async def ship(n: int) -> str:
            complete_by = datetime.now(UTC) + timedelta(seconds=30)
            try:
                await caller.post("/shipping/ship", {"n": n}, f"order-{n}:ship", complete_by)
            except ApplicationError as err:
                return err.type or "error"
            return "answered"

        def on_the_shared_queue() -> ActivityEnvironment:
            environment = ActivityEnvironment()
            environment.info = dataclasses.replace(environment.info, task_queue="tasks", heartbeat_timeout=None)
            return environment

        # Three attempts handed to the worker at once, as three ship steps scheduled together are.
        calls = [asyncio.ensure_future(on_the_shared_queue().run(ship, n)) for n in range(3)]
        done, pending = await asyncio.wait(calls, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        # The first to end is the one refused, at once; the other two are out at the service.
        assert [c.result() for c in done] == [SLOTS_FULL]
        assert len(pending) == 2

        async def at_the_service() -> int:
            return len(hung_service.connections)

        await wait_until(at_the_service, lambda n: n == 2, what="two calls at the service")
        hung_service.drop_connections()  # the service goes away: the two calls end
        assert await asyncio.gather(*pending) == [TRANSIENT, TRANSIENT]
