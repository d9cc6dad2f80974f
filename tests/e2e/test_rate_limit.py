"""A service declared at N calls per second never sees more, counted where it counts them: at the
service, over every worker, retries included.

Two worker stacks (two processes' workers, each with its own callers and breakers) serve the same
queues over one state store, against a loopback service that notes when each request arrives and
refuses the first attempt of each key (503), so that every task's call is retried."""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig

from sas import state_store, workflows
from sas.breaker.rate_limit import SharedRateLimit
from sas.settings import DatabaseSettings, ServicesSettings, get_settings
from sas.state_store.rate_limits import take_lease
from sas.task_models import StepPolicyValues, TaskState
from sas.workflows import registry
from tests.helpers import fresh_id, serving, wait_until
from tests.postgres import fresh_database
from tests.stack import ADMIN_TOKEN, Stack, migrated, more_workers, start_stack

# The heaviest runs (hundreds of tasks, a stack under load) go one at a time on one worker, so
# the timing-sensitive tests beside them do not all share the machine with them at once.
pytestmark = pytest.mark.xdist_group("heavy")

PER_SECOND = 5
TASKS = 40
# Each attempt may wait for the limit well past the tests' usual 2 s complete-by: 80 calls at 5 a
# second take 16 s, and a wait that outlived the attempt would end the task in a way not under test.
PATIENT = StepPolicyValues(
    complete_by_s=120.0, heartbeat_s=10.0, max_attempts=10, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)


class Meter:
    """The service's own count: when each request arrived (monotonic seconds), and the keys seen."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.keys: set[str] = set()

    def app(self) -> Starlette:
        async def ping(request: Request) -> Response:
            self.arrivals.append(time.monotonic())
            key = request.headers["Idempotency-Key"]
            if key not in self.keys:
                # The first attempt of each call is refused as a transient fault: its retry must
                # be counted against the limit like any other call.
                self.keys.add(key)
                return JSONResponse({"error": "busy", "message": "try again"}, status_code=503)
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/meter/ping", ping, methods=["POST"])])


def most_in_a_second(arrivals: list[float]) -> int:
    """The most requests in any window [t, t + 1 s): a busiest window can always be slid right
    until it starts at an arrival, so the windows starting at each arrival are all there is to check."""
    times = sorted(arrivals)
    return max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)


def test_the_window_rule_counts_a_window_closed_at_its_start_and_open_at_its_end() -> None:
    assert most_in_a_second([0.0, 0.5, 0.999]) == 3
    assert most_in_a_second([0.0, 0.5, 1.0]) == 2  # 1.0 is the next window's
    assert most_in_a_second([0.0, 1.0, 2.0, 2.1]) == 2
    assert most_in_a_second([]) == 0


@pytest.fixture
def metered_type(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAS_TASK_TYPES__MODULES", "tests.e2e.metered")
    get_settings.cache_clear()
    registry.refresh()
    yield
    get_settings.cache_clear()
    registry.refresh()


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The state store the workers share the limit through: SQLite (one host), or PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    request.getfixturevalue("postgres_required")
    with fresh_database() as url:
        yield url


@pytest_asyncio.fixture
async def meter() -> AsyncIterator[tuple[str, Meter]]:
    counted = Meter()
    async with serving(counted.app(), "the meter service") as url:
        yield url, counted


async def agent_identities(client: Client, task_ids: list[str]) -> set[str]:
    """The workers whose Agents started the tasks' calls, from Temporal's histories."""
    seen: set[str] = set()
    for task_id in task_ids:
        history = await client.get_workflow_handle(task_id).fetch_history()
        seen |= {
            e.activity_task_started_event_attributes.identity
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        }
    return seen


async def test_no_second_at_the_service_holds_more_calls_than_its_limit_over_two_workers(
    metered_type: None, meter: tuple[str, Meter], client: Client, temporal_address: str, services: Any, any_db: str
) -> None:
    url, counted = meter
    where = ServicesSettings(
        url=services.url,
        admin_token=ADMIN_TOKEN,
        meter={"url": url, "max_per_second": PER_SECOND},  # type: ignore[call-arg]
    )
    async with start_stack(
        client,
        temporal_address,
        services.url,
        any_db,
        supervisor=False,
        identity="worker-a",
        services=where,
        steps={"ping": PATIENT},
    ) as stack:
        # The SDK allows one worker per task queue per client: the second stack's workers get a
        # connection (and runtime) of their own, as another worker process would.
        other = await Client.connect(
            temporal_address,
            namespace=client.namespace,
            data_converter=client.data_converter,
            runtime=Runtime(telemetry=TelemetryConfig()),
        )
        async with more_workers(
            dataclasses.replace(stack, client=other), stack.settings, "worker-b", list(workflows.ALL_WORKFLOWS)
        ):
            await burst_of_tasks(stack, client)
    # Every task's call came twice, refused then answered: the retries were counted too.
    assert len(counted.arrivals) == 2 * TASKS
    busiest = most_in_a_second(counted.arrivals)
    print(f"\nmost calls at the service in any second: {busiest} (limit {PER_SECOND})")
    assert busiest <= PER_SECOND


async def burst_of_tasks(stack: Stack, client: Client) -> None:
    """TASKS one-step tasks submitted at once, each processed, by both workers' Agents."""
    task_ids = [fresh_id("metered") for _ in range(TASKS)]
    # The burst: every task submitted at once, so that both workers have calls to make together.
    handles = await asyncio.gather(
        *(stack.submit(task_id, {"n": n}, "MeteredWorkflow") for n, task_id in enumerate(task_ids))
    )
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=240)
    assert [r.state for r in results] == [TaskState.PROCESSED] * TASKS
    # Both workers made calls: the limit held over the two, not within one.
    assert {"worker-a", "worker-b"} <= await agent_identities(client, task_ids)


def test_the_permits_and_their_hold_follow_the_calls_per_second() -> None:
    sessions: Any = None
    assert [(p.permits, p.hold_s) for p in (SharedRateLimit("m", n, sessions) for n in (5, 7.9, 1, 0.5))] == [
        (5, 1.0),
        (7, 1.0),
        (1, 1.0),
        (1, 2.0),
    ]


async def test_a_permit_is_shared_by_the_workers_and_free_again_only_a_hold_after_it_is_given_back(
    any_db: str,
) -> None:
    await migrated(any_db)
    engine = state_store.create_engine(DatabaseSettings(url=any_db))
    sessions = state_store.session_factory(engine)
    try:
        one, other = SharedRateLimit("meter", 2, sessions), SharedRateLimit("meter", 2, sessions)

        async def third_call() -> int | None:
            async with sessions() as session:
                slot, _ = await take_lease(session, "meter", 2, "third", 5.0)
                return slot

        first, second = await one.take(5.0), await other.take(5.0)
        assert first.slot != second.slot
        assert await third_call() is None  # both permits held, one by each worker
        await one.give_back(first)
        assert await third_call() is None  # its call has ended, but its second has not
        waiting = asyncio.ensure_future(other.take(5.0))

        async def given() -> bool:
            return waiting.done()

        await wait_until(given, timeout=30, what="the permit given back, a second later")
        taken = waiting.result()
        assert taken.slot == first.slot
        await other.give_back(taken)
        await other.give_back(second)
    finally:
        await engine.dispose()
