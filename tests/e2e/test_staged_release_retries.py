"""The backlog an operator or the Supervisor lets go at once goes in stages too: an incident
retried (``TaskClient.bulk("retry", Selection(incident=ID))``, what ``sas retry --incident``
runs) and the cool-downs of tasks that failed together, ending together. Each begins the staged
release a closing breaker begins (``sas/breaker/backlog.py``): canaries, then growing waves up to
the service's rate; and canaries failing again stop it and open the breaker.

A loopback service of the test's own refuses every call until the test says it is back, then
answers; it notes when each request arrived and was answered (``Ledger`` here, the helpers of
``tests/e2e/test_staged_release.py`` reading it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.client import Client, WorkflowExecutionStatus

from sas.breaker.settings import BreakerSettings, ReleaseSettings
from sas.settings import ServicesSettings, SupervisorSettings
from sas.state_store.incidents import incident_task_ids, list_incidents
from sas.supervisor.run.worker import build_worker, ensure_supervisor_running
from sas.task_models import StepPolicyValues, TaskResult, TaskState
from tests.e2e.test_staged_release import (
    assert_waves_grow,
    calls_waiting,
    count_in,
    meter,
    metered_type,
    most_in_a_second,
)
from tests.helpers import fresh_id, serving, wait_until
from tests.postgres import fresh_database
from tests.stack import ADMIN_TOKEN, Stack, start_stack

pytestmark = pytest.mark.xdist_group("heavy")
__all__ = ["metered_type"]  # a fixture, used by name

PER_SECOND = 20
BACKLOG = 200
# Waves of 3 s at 2, 4, 8 calls a second, then 20 (the service's limit): the release is over in
# about 17 s, its first waves small enough for a loaded machine to keep up with, so that each
# wave's count is the release's doing.
RELEASE = ReleaseSettings(canaries=3, first_wave=2, growth=2, wave_s=3, jitter=0.2)
PLAN = RELEASE.plan(PER_SECOND)
# Opened only by a canary: no window of failures trips it (the first calls all fail), no probe.
BREAKER = BreakerSettings(enabled=True, min_calls=100_000, open_s=3_600, sync_s=0.2)
# One attempt: a failed call is the Supervisor's at once. A call waits its turn for up to the
# release's length, well within its complete-by; a starved worker's heartbeat is late, not lost.
ONE_TRY = StepPolicyValues(
    complete_by_s=240.0, heartbeat_s=120.0, max_attempts=1, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)
# The cool-down after the one failure of each task's call.
COOLDOWN_S = 2.0


class Ledger:
    """The service's own record: when each request arrived and was answered (wall clock, the
    host's, which is the state store's too), answered ``status`` (422: refused for good; 503: down)
    until ``back``; then ``arrivals`` holds only the released calls."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.arrivals: list[float] = []
        self.answered: list[float] = []
        self.before = 0  # calls that arrived before it came back
        # Set: the first calls after it came back (the canaries) are answered.
        self.canaries_go = asyncio.Event()
        self.canaries_go.set()

    def back(self, status: int = 200, slow_canaries: bool = False) -> None:
        """From now on, answer ``status``; the calls so far are counted in ``before``.
        ``slow_canaries``: the first calls are answered once ``canaries_go`` is set."""
        self.before += len(self.arrivals)
        self.arrivals, self.answered, self.status = [], [], status
        if slow_canaries:
            self.canaries_go.clear()

    def app(self) -> Starlette:
        async def ping(request: Request) -> Response:
            self.arrivals.append(time.time())
            status = self.status
            if len(self.arrivals) <= RELEASE.canaries:
                await self.canaries_go.wait()
            self.answered.append(time.time())
            return _answer(status)

        return Starlette(routes=[Route("/meter/ping", ping, methods=["POST"])])


def _answer(status: int) -> Response:
    if status == 200:
        return JSONResponse({"ok": True})
    return JSONResponse({"error": "refused" if status < 500 else "down", "message": "no"}, status_code=status)


@pytest.fixture(params=["sqlite", "postgres"])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    request.getfixturevalue("postgres_required")
    with fresh_database() as url:
        yield url


def _settings(services: Any, url: str, ladder: dict[str, Any]) -> dict[str, Any]:
    where = ServicesSettings(
        url=services.url,
        admin_token=ADMIN_TOKEN,
        # A call's timeout is also how long the canaries may take to answer before the waves begin.
        meter={  # type: ignore[call-arg]
            "url": url,
            "max_per_second": PER_SECOND,
            "breaker": BREAKER,
            "release": RELEASE,
            "timeout_s": 120.0,
        },
    )
    supervisor = SupervisorSettings(
        interval_s=0.5,
        # The whole backlog's retries in one sweep, sent at once: the release, not the sweep, paces them.
        batch_size=BACKLOG + 50,
        concurrency=64,
        retries=0,
        overdue_grace_s=1.5,
        orphan_after_s=3600,
        orphan_check_s=3600,
        outcome="park",
        workflow_id=fresh_id("supervisor"),
        **ladder,
    )
    return {"services": where, "supervisor_settings": supervisor, "steps": {"ping": ONE_TRY}}


@pytest_asyncio.fixture
async def refused_once(
    metered_type: None, client: Client, temporal_address: str, services: Any, any_db: str
) -> AsyncIterator[tuple[Stack, Ledger]]:
    """Every call refused for good until the test says the service is back (parked at once, an incident)."""
    kept = Ledger(422)
    async with (
        serving(kept.app(), "the meter service") as url,
        start_stack(
            client, temporal_address, services.url, any_db, **_settings(services, url, {"cooldown_tries": 0})
        ) as stack,
    ):
        yield stack, kept


@pytest_asyncio.fixture
async def down_once(
    metered_type: None, client: Client, temporal_address: str, services: Any, any_db: str
) -> AsyncIterator[tuple[Stack, Ledger]]:
    """Every call failing as a service that is down does until the test says it is back; one
    cool-down try. No Supervisor yet: ``supervised`` starts it."""
    kept = Ledger(503)
    async with serving(kept.app(), "the meter service") as url:
        given = _settings(services, url, {"cooldown_tries": 1, "cooldown_s": COOLDOWN_S})
        async with start_stack(client, temporal_address, services.url, any_db, supervisor=False, **given) as stack:
            yield stack, kept


@asynccontextmanager
async def supervised(stack: Stack) -> AsyncIterator[None]:
    """The stack's Supervisor, started now."""
    async with build_worker(stack.client, stack.settings, stack.sessions, "test-supervisor"):
        await ensure_supervisor_running(stack.client, stack.settings)
        try:
            yield
        finally:
            await stack.client.get_workflow_handle(stack.settings.supervisor.workflow_id).terminate("test over")


async def submitted(stack: Stack, count: int) -> list[Any]:
    return list(
        await asyncio.gather(*(stack.submit(fresh_id("retried"), {"n": n}, "MeteredWorkflow") for n in range(count)))
    )


async def parked_incident(stack: Stack, handles: list[Any]) -> tuple[int, list[str]]:
    """The one incident of the tasks parked at the service, once every task is parked, and the
    tasks parked outside it: a starved worker may lose a call's heartbeat, another cause."""
    ids = [h.id for h in handles]

    async def parked() -> int:
        async with stack.sessions() as session:
            return int(await session.scalar(text("select count(*) from steps where state = 'Error'")) or 0)

    await wait_until(parked, lambda n: n == len(ids), timeout=300, what="every task parked")

    async def listed() -> list[tuple[int, int, int]]:
        """(alert id, tasks, parked) of each open incident."""
        async with stack.sessions() as session:
            found = await list_incidents(session, "open", 10)
        return [(int(alert.id), incident.task_count, incident.parked) for alert, incident in found]

    def settled(found: list[tuple[int, int, int]]) -> bool:
        # One incident, every task of it parked, most of the tasks in it (on a starved machine
        # a few more than two may park for another cause: a call's heartbeat lost, say).
        return len(found) == 1 and found[0][1] == found[0][2] >= len(ids) // 2

    # Two looks a second apart agreeing: the Supervisor has stopped adding tasks to it, so
    # that none is retried twice, by the incident and on its own.
    last: list[tuple[int, int, int]] = []

    async def steady() -> list[tuple[int, int, int]]:
        nonlocal last
        before, now = last, await listed()
        last = now
        return now if now == before else []

    [(alert_id, _, _)] = await wait_until(
        steady, settled, timeout=180, interval=1.0, what="one incident of the parked tasks, settled"
    )
    async with stack.sessions() as session:
        members = set(await incident_task_ids(session, alert_id, 1000))
    return alert_id, [i for i in ids if i not in members]


async def retried(stack: Stack, incident: int, stragglers: list[str], reason: str) -> list[Any]:
    """``sas retry --incident ID`` (what it runs), then the few parked for another cause, one each."""
    from sas.api.client import Selection, TaskClient

    tasks = TaskClient(stack.client, stack.settings, actor="drill")
    done = await tasks.bulk("retry", Selection(limit=1000, incident=incident), reason=reason)
    for task_id in stragglers:
        await tasks.retry(task_id, reason=reason)
    return list(done.results)


async def incident_release(stack: Stack, incident: int) -> str | None:
    """The release beside the incident, as ``sas incidents ID`` shows it (``TaskClient.incident``)."""
    from sas.api.client import TaskClient

    return (await TaskClient(stack.client, stack.settings).incident(incident)).release


async def canaries_answered_once_the_rest_waits(stack: Stack, kept: Ledger, handles: list[Any]) -> None:
    """The canaries answer once every other task's call has reached the service or waits in its
    queue: the backlog is all there, as after an outage, however slowly a loaded machine let it
    go, so that the waves, not the machine, pace what follows."""
    ids = [h.id for h in handles]

    async def there() -> int:
        return sum(1 for attempt in await calls_waiting(stack, ids) if attempt) + len(kept.arrivals)

    await wait_until(there, lambda n: n >= len(ids), timeout=300, interval=1.0, what="the backlog waiting for its turn")
    kept.canaries_go.set()


def assert_staged(kept: Ledger, count: int) -> None:
    """The released calls, at the service: the canaries first, then growing waves within the
    release's allowance, and no second above the service's rate."""
    assert len(kept.arrivals) == count  # one retry each, none refused at the service again
    arrivals = sorted(kept.arrivals)
    canaries_answered = max(sorted(kept.answered)[: RELEASE.canaries])
    over = [
        (i + 1, round(t - canaries_answered, 2))
        for i, t in enumerate(arrivals)
        if i + 1 > PLAN.allowed(t - canaries_answered + 0.01)
    ]
    waves = [
        count_in(arrivals, canaries_answered + k * RELEASE.wave_s, canaries_answered + (k + 1) * RELEASE.wave_s)
        for k in range(3)
    ]
    busiest = most_in_a_second(arrivals)
    print(f"\ncanaries {arrivals[: RELEASE.canaries]}, waves {waves}, busiest second {busiest} (limit {PER_SECOND})")
    assert arrivals[RELEASE.canaries] > canaries_answered, "a call arrived before the canaries had answered"
    assert over == [], "calls beyond the release's allowance"
    assert_waves_grow(RELEASE, arrivals, canaries_answered)
    assert busiest <= PER_SECOND


async def all_processed(handles: list[Any]) -> None:
    results: list[TaskResult] = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=300)
    assert [r.state for r in results] == [TaskState.PROCESSED] * len(handles)  # none compensated


# 200 tasks failed, then released: 40 to 95 s alone, several times that beside the other test
# workers on a two-core machine.
@pytest.mark.timeout(900)
async def test_an_incident_retried_releases_its_tasks_in_canaries_then_growing_waves(
    refused_once: tuple[Stack, Ledger],
) -> None:
    stack, kept = refused_once
    handles = await submitted(stack, BACKLOG)
    incident, stragglers = await parked_incident(stack, handles)
    kept.back(slow_canaries=True)
    done = await retried(stack, incident, stragglers, "the service is back")
    assert [r.outcome for r in done] == ["ok"] * (BACKLOG - len(stragglers))
    # ``sas incidents`` says the release as ``sas services`` does: with the backlog Temporal counts.
    await wait_until(
        lambda: incident_release(stack, incident),
        lambda shown: shown is not None and "canaries answered, " in shown and shown.endswith(" calls waiting"),
        timeout=120,
        interval=0.5,
        what="sas incidents counting the release's backlog",
    )
    await canaries_answered_once_the_rest_waits(stack, kept, handles)
    await all_processed(handles)
    assert_staged(kept, BACKLOG)
    after = await wait_until(lambda: meter(stack), lambda v: v.release_since is None, what="the release ended")
    assert after.state == "closed"


# 200 tasks failed, then released: 40 to 95 s alone, several times that beside the other test
# workers on a two-core machine.
@pytest.mark.timeout(900)
async def test_cool_downs_ending_together_release_their_tasks_in_canaries_then_growing_waves(
    down_once: tuple[Stack, Ledger],
) -> None:
    stack, kept = down_once
    handles = await submitted(stack, BACKLOG)
    # Every task's call failed once; only then does the Supervisor look, so that their cool-downs,
    # short, end together (however long a loaded machine took to fail them all).
    await wait_until(lambda: failed_steps(stack), lambda n: n == BACKLOG, timeout=180, what="every task's call failed")
    kept.back(slow_canaries=True)
    async with supervised(stack):
        await canaries_answered_once_the_rest_waits(stack, kept, handles)
        await all_processed(handles)
    assert_staged(kept, BACKLOG)


async def failed_steps(stack: Stack) -> int:
    async with stack.sessions() as session:
        return int(await session.scalar(text("select count(*) from steps where state = 'Failed'")) or 0)


@pytest.mark.parametrize("any_db", ["sqlite"], indirect=True)
async def test_failing_canaries_stop_an_incident_retry_and_open_the_breaker(
    refused_once: tuple[Stack, Ledger],
) -> None:
    stack, kept = refused_once
    handles = await submitted(stack, 30)
    incident, stragglers = await parked_incident(stack, handles)
    kept.back(503)  # the service is not back after all
    await retried(stack, incident, stragglers, "the service is back?")
    opened = await wait_until(lambda: meter(stack), lambda v: v.state == "open", what="the breaker open again")
    # A canary opened it, with no release under way; the operator did not.
    assert (opened.forced_by, opened.release_since) == (None, None)
    # Only canaries reached the service (one, or more polled before the first failed).
    assert 1 <= len(kept.arrivals) <= RELEASE.canaries
    # Nothing was undone: every task waits for the service (a failed canary at the Supervisor's,
    # the others held in the service's queue).
    statuses = [(await h.describe()).status for h in handles]
    assert statuses == [WorkflowExecutionStatus.RUNNING] * 30


async def test_a_backlog_begins_a_release_only_past_its_canaries_and_joins_one_that_paces(tmp_path: Path) -> None:
    from sas import state_store
    from sas.breaker.backlog import release_backlog
    from sas.breaker.rows import force, read_breakers
    from sas.breaker.settings import ResolvedBreaker
    from sas.settings import DatabaseSettings
    from tests.stack import migrated

    url = f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
    await migrated(url)
    engine = state_store.create_engine(DatabaseSettings(url=url))
    sessions = state_store.session_factory(engine)
    breakers = {"meter": ResolvedBreaker(sync_s=0.1, release=RELEASE, max_per_second=PER_SECOND)}

    async def since() -> float | None:
        async with sessions() as session:
            return (await read_breakers(session))["meter"].release_since

    try:
        # No more tasks than the canaries: they would all go as canaries anyway.
        assert await release_backlog(sessions, {"meter": RELEASE.canaries}, breakers, "test") == []
        assert await release_backlog(sessions, {"meter": RELEASE.canaries + 1}, breakers, "test") == ["meter"]
        begun = await since()
        assert begun is not None
        # A release at its canaries paces: the next backlog joins it, one release.
        assert await release_backlog(sessions, {"meter": 100}, breakers, "test") == []
        assert await since() == begun
        # A held service is its breaker's: its closing begins the release.
        async with sessions() as session:
            await force(session, "meter", "open", "drill", "test", datetime.now(UTC))
        assert await release_backlog(sessions, {"meter": 100}, breakers, "test") == []
        assert await since() is None
    finally:
        await engine.dispose()


def test_the_supervisor_marks_the_retries_after_a_cool_down_not_the_quick_ones() -> None:
    from sas.supervisor.decide import decide
    from sas.supervisor.models import DueStep, SupervisorPolicy
    from sas.task_models.ladder import Ladder

    now = datetime.now(UTC)
    failed = DueStep(
        task_id="t",
        task_type="metered",
        workflow_type="MeteredWorkflow",
        task_queue="q",
        step="ping",
        state="Failed",
        failure_count=0,
        version=1,
        complete_by=None,
        complete_by_s=10.0,
        updated_at=now - timedelta(seconds=60),
    )
    quick = Ladder(retries=1, retry_delay_s=1.0, cooldown_tries=1, cooldown_s=30.0, outcome="park")
    first = decide(failed.model_copy(update={"ladder": quick}), SupervisorPolicy(), now)
    after_cool_down = decide(failed.model_copy(update={"ladder": quick, "failure_count": 1}), SupervisorPolicy(), now)
    assert (first.kind, first.cooled_down) == ("retry", False)
    assert (after_cool_down.kind, after_cool_down.cooled_down) == ("retry", True)
