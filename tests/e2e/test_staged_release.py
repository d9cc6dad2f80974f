"""A service whose breaker closes gets its held work back in stages, not all at once: a few
canaries first, then waves of growing rate up to its normal one; and if the canaries fail, the
release stops and the breaker opens again, the rest of the work still held.

A one-step task type (``tests/e2e/metered.py``) calls a loopback service of the test's own that
notes when each request arrives and when it was answered. The work is held with the breaker
forced open, as an operator's ``sas services open`` does (the breaker rows' API), and let go
with a forced close: a release like a good probe's."""

from __future__ import annotations

import asyncio
import bisect
import re
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus

from sas.breaker.model import BreakerView
from sas.breaker.rows import force, read_breakers
from sas.breaker.settings import BreakerSettings, ReleaseSettings
from sas.settings import ServicesSettings, get_settings
from sas.task_models import StepPolicyValues, TaskState
from sas.workflows import registry
from tests.helpers import fresh_id, serving, wait_until
from tests.postgres import fresh_database
from tests.stack import ADMIN_TOKEN, Stack, start_stack

# The heaviest runs (hundreds of tasks, a stack under load) go one at a time on one worker, so
# the timing-sensitive tests beside them do not all share the machine with them at once.
pytestmark = pytest.mark.xdist_group("heavy")

PER_SECOND = 10
BACKLOG = 200
# Waves of 3 s at 2, 4, 8 calls a second, then 10 (the service's limit): small enough that a
# loaded machine keeps up with each wave, so that each wave's count is the release's doing.
RELEASE = ReleaseSettings(canaries=3, first_wave=2, growth=2, wave_s=3, jitter=0.2)
PLAN = RELEASE.plan(PER_SECOND)
# Automatic opening only through a canary: no window of failures trips it, and no probe comes
# while the test looks (the outage is the operator's).
BREAKER = BreakerSettings(enabled=True, min_calls=100_000, open_s=3_600, sync_s=0.2)
# The backlog drains at the service's rate: an attempt may wait its turn long past the tests'
# usual complete-by, and a wait that outlived the attempt would end tasks in a way not under test.
PATIENT = StepPolicyValues(
    complete_by_s=180.0, heartbeat_s=10.0, max_attempts=10, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)


class Ledger:
    """The service's own record: when each request arrived and was answered (wall clock, the
    host's, which is the state store's too), and whether it answers (503 while ``failing``)."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.answered: list[float] = []
        self.failing = False

    def app(self) -> Starlette:
        async def ping(request: Request) -> Response:
            self.arrivals.append(time.time())
            if self.failing:
                self.answered.append(time.time())
                return JSONResponse({"error": "down", "message": "still down"}, status_code=503)
            self.answered.append(time.time())
            return JSONResponse({"ok": True})

        return Starlette(routes=[Route("/meter/ping", ping, methods=["POST"])])


def most_in_a_second(arrivals: list[float]) -> int:
    """The most requests in any window [t, t + 1 s) (one starting at an arrival is the busiest)."""
    return most_in_a_window(arrivals, 1.0)


def count_in(arrivals: list[float], start: float, end: float) -> int:
    """Requests that arrived in [start, end)."""
    times = sorted(arrivals)
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def most_in_a_window(arrivals: list[float], seconds: float) -> int:
    """The most requests in any window [t, t + seconds) (one starting at an arrival is the busiest)."""
    times = sorted(arrivals)
    return max((bisect.bisect_left(times, t + seconds) - i for i, t in enumerate(times)), default=0)


def assert_waves_grow(release: ReleaseSettings, arrivals: list[float], canaries_answered: float) -> None:
    """The release does not stay at its first wave's rate: after the first wave, some wave-long
    window holds more calls than the first wave may let through (its rate, jitter included).
    Each wave is not held to the one before: on a starved machine (workflow tasks of several
    seconds) the calls of two waves arrive bunched, and a wave's count is the machine's doing;
    what the release allows at each moment is ``PLAN.allowed``, checked call by call."""
    first_wave = release.first_wave * release.wave_s * (1 + release.jitter)
    later = [t for t in arrivals if t >= canaries_answered + release.wave_s]
    assert most_in_a_window(later, release.wave_s) > first_wave, "the release stayed at its first wave's rate"


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
    """The state store the release is counted in: SQLite, or PostgreSQL (the new columns on both)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    request.getfixturevalue("postgres_required")
    with fresh_database() as url:
        yield url


@pytest_asyncio.fixture
async def ledger() -> AsyncIterator[tuple[str, Ledger]]:
    kept = Ledger()
    async with serving(kept.app(), "the meter service") as url:
        yield url, kept


@pytest_asyncio.fixture
async def meter_stack(
    metered_type: None, ledger: tuple[str, Ledger], client: Client, temporal_address: str, services: Any, any_db: str
) -> AsyncIterator[Stack]:
    url, _ = ledger
    where = ServicesSettings(
        url=services.url,
        admin_token=ADMIN_TOKEN,
        meter={"url": url, "max_per_second": PER_SECOND, "breaker": BREAKER, "release": RELEASE},  # type: ignore[call-arg]
    )
    async with start_stack(
        client, temporal_address, services.url, any_db, supervisor=False, services=where, steps={"ping": PATIENT}
    ) as stack:
        yield stack


async def meter(stack: Stack) -> BreakerView:
    async with stack.sessions() as session:
        return (await read_breakers(session)).get("meter", BreakerView(service="meter"))


async def force_meter(stack: Stack, state: Any) -> None:
    async with stack.sessions() as session:
        await force(session, "meter", state, "drill", "outage drill", datetime.now(UTC))


async def held_backlog(stack: Stack, count: int) -> list[Any]:
    """``count`` tasks submitted while the breaker holds, once each one's call waits in the
    service's queue, unstarted (the gate keeps the queue unpolled)."""
    await force_meter(stack, "open")
    await wait_until(lambda: _true(worker_holds(stack)), what="the worker sees the breaker held")
    handles = await asyncio.gather(
        *(stack.submit(fresh_id("released"), {"n": n}, "MeteredWorkflow") for n in range(count))
    )
    # Attempt 1 or a later one: on a starved machine a call the worker had already taken may miss
    # its heartbeat and wait again as attempt 2, still unsent (the ledger says none arrived).
    # Polled once a second: each look describes every task, a load of its own on the server.
    await wait_until(
        lambda: calls_waiting(stack, [h.id for h in handles]),
        lambda attempts: all(attempt >= 1 for attempt in attempts),
        timeout=300,
        interval=1.0,
        what="every task's call waiting in the service's queue",
    )
    return list(handles)


async def release_line(stack: Stack) -> str | None:
    """The meter's release as ``sas services`` shows it (``TaskClient.services``)."""
    from sas.api.client import TaskClient

    [view] = [v for v in await TaskClient(stack.client, stack.settings).services() if v.service == "meter"]
    return view.release


def worker_holds(stack: Stack) -> bool:
    """Whether the in-process worker's breaker of the service holds (it reads the row every sync_s)."""
    assert stack.breakers is not None
    return stack.breakers["meter"].holding()


async def _true(value: bool) -> bool:
    return value


async def calls_waiting(stack: Stack, task_ids: list[str]) -> list[int]:
    """The attempt of each task's call waiting in the queue (scheduled, not started); 0 for none."""
    turns = asyncio.Semaphore(20)

    async def one(task_id: str) -> int:
        async with turns:
            described = await stack.client.get_workflow_handle(task_id).describe()
        waiting = [
            a.attempt
            for a in described.raw_description.pending_activities
            if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        ]
        return waiting[0] if waiting else 0

    return list(await asyncio.gather(*(one(t) for t in task_ids)))


# 200 tasks held, then released at 10 a second: about 80 s alone, several times that beside the
# other test workers on a two-core machine.
@pytest.mark.timeout(900)
async def test_a_closed_breaker_releases_its_backlog_in_canaries_then_growing_waves(
    meter_stack: Stack, ledger: tuple[str, Ledger]
) -> None:
    stack, (_, kept) = meter_stack, ledger
    handles = await held_backlog(stack, BACKLOG)
    assert kept.arrivals == []  # held: nothing reached the service
    await force_meter(stack, "closed")
    # What ``sas services`` shows meanwhile counts the backlog, Temporal's of the service's queue.
    line = await wait_until(
        lambda: release_line(stack),
        lambda shown: shown is not None and " of about " in shown,
        timeout=120,
        interval=0.5,
        what="sas services counting the release's backlog",
    )
    total = int(re.search(r" of about (\d+) let through", line or "").group(1))  # type: ignore[union-attr]
    # Temporal's backlog is approximate (a call polled and handed back is counted again for a
    # while), so "about" may run a little over the held calls; never to the allowance's size.
    assert BACKLOG // 2 <= total <= BACKLOG * 11 // 10 + RELEASE.canaries, line
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=300)
    # Every task completed, none compensated, each with one call (none failed).
    assert [r.state for r in results] == [TaskState.PROCESSED] * BACKLOG
    assert len(kept.arrivals) == BACKLOG
    arrivals = sorted(kept.arrivals)
    # The canaries first: no other call arrived before the canaries had all been answered.
    canaries_answered = max(sorted(kept.answered)[: RELEASE.canaries])
    assert arrivals[RELEASE.canaries] > canaries_answered
    # The waves begin once the canaries answered; from then, the requests that arrived by any time t
    # are at most the release's allowance at t (every call waits for its turn before it is polled).
    over = [
        (i + 1, t - canaries_answered)
        for i, t in enumerate(arrivals)
        if i + 1 > PLAN.allowed(t - canaries_answered + 0.01)
    ]
    assert over == []
    # The waves after the canaries, as they came (printed: what a failure looked like).
    waves = [
        count_in(arrivals, canaries_answered + k * RELEASE.wave_s, canaries_answered + (k + 1) * RELEASE.wave_s)
        for k in range(3)
    ]
    busiest = most_in_a_second(arrivals)
    print(f"\ncanaries {arrivals[: RELEASE.canaries]}, waves {waves}, busiest second {busiest} (limit {PER_SECOND})")
    assert_waves_grow(RELEASE, arrivals, canaries_answered)
    # And no window [t, t + 1 s) at the service above its rate.
    assert busiest <= PER_SECOND
    # The release ended with the backlog.
    after = await wait_until(lambda: meter(stack), lambda v: v.release_since is None, what="the release ended")
    assert after.state == "closed"


async def test_failing_canaries_stop_the_release_and_open_the_breaker_again(
    meter_stack: Stack, ledger: tuple[str, Ledger]
) -> None:
    stack, (_, kept) = meter_stack, ledger
    kept.failing = True  # the service is not back yet
    handles = await held_backlog(stack, 30)
    await force_meter(stack, "closed")
    opened = await wait_until(lambda: meter(stack), lambda v: v.state == "open", what="the breaker open again")
    # A canary opened it, not the operator, and with no release under way.
    assert (opened.forced_by, opened.release_since, opened.last_error is not None) == (None, None, True)
    await wait_until(lambda: _true(worker_holds(stack)), what="the worker sees it open again")
    # The canaries' retries wait in the queue like the rest, unstarted (a canary whose retry the
    # open breaker refused is started again as a new attempt 1, held the same): every call waits,
    # none runs, and the calls that reached the service were the canaries and no more. A canary the
    # worker polled after the first one's failure had opened the breaker again is refused at the
    # worker and never arrives, so between one and all of the canaries reach the service.
    attempts = await wait_until(
        lambda: calls_waiting(stack, [h.id for h in handles]),
        lambda a: all(n >= 1 for n in a) and sum(n >= 2 for n in a) <= RELEASE.canaries,
        what="the canaries' retries held with the rest",
    )
    assert 1 <= len(kept.arrivals) <= RELEASE.canaries, attempts
    # Nothing ended: no task compensated, every one still waits for the service.
    statuses = [(await h.describe()).status for h in handles]
    assert statuses == [WorkflowExecutionStatus.RUNNING] * 30


def test_the_allowance_grows_wave_by_wave_up_to_the_normal_rate_and_sas_services_says_where_it_is() -> None:
    # 3 canaries; waves of 3 s at 2, 4, 8, then 10 a second (the ceiling), spread over each wave.
    assert [PLAN.allowed(t) for t in (None, 0, 1.5, 3, 6, 9, 10)] == [3, 3, 6, 9, 21, 45, 55]
    assert [PLAN.rate(k) for k in range(5)] == [2, 4, 8, 10, 10]
    assert PLAN.wait_s(3.0, 9) == pytest.approx(0.25)  # one more call at 4 a second
    assert not PLAN.drained(4.5, 4) and PLAN.drained(4.5, 3)  # 12 unused: a whole wave of 4 a second
    at = 1_000.0
    view = BreakerView(service="meter", release_since=at, release_waves_at=at + 1, release_let=15, release_ok=3)
    assert PLAN.describe(view, at + 5.5) == "releasing: wave 2 at 4/s, 15 of 15 calls let through, next wave in 2 s"
    # With the service queue's backlog known (``sas services`` asks Temporal): of the whole backlog.
    assert PLAN.describe(view, at + 5.5, waiting=385) == (
        "releasing: wave 2 at 4/s, 15 of about 400 let through, next wave in 2 s"
    )
    assert PLAN.describe(BreakerView(service="meter", release_since=at, release_ok=1), at, waiting=397) == (
        "releasing: 1 of 3 canaries answered, 397 calls waiting"
    )
    assert PLAN.describe(BreakerView(service="meter", release_since=at, release_ok=1), at) == (
        "releasing: 1 of 3 canaries answered"
    )
    assert PLAN.describe(BreakerView(service="meter"), at) is None
