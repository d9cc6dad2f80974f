"""The circuit breakers' shared rows (sas/breaker/rows.py) and two workers' breakers sharing
them (sas/breaker/service.py), on SQLite and PostgreSQL: every transition happens once however
many workers see it, one alert per outage, an operator's forced transitions audited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sas import state_store
from sas.breaker.model import BreakerView
from sas.breaker.rows import alert_key, claim_probe, close, force, read_breakers, trip
from sas.breaker.service import ServiceBreaker
from sas.breaker.settings import ReleaseSettings, ResolvedBreaker
from sas.settings import BreakerSettings, DatabaseSettings
from sas.state_store.queries import audit_for
from sas.state_store.tables import Alert

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


async def alerts(sessions) -> list[Alert]:  # type: ignore[no-untyped-def]
    from sqlalchemy import select

    async with sessions() as session:
        return list((await session.scalars(select(Alert).where(Alert.kind == "breaker_open"))).all())


async def test_each_transition_happens_once_and_one_alert_spans_the_outage(db_url: str) -> None:
    await state_store.upgrade_async(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    sessions = state_store.session_factory(engine)
    try:
        async with sessions() as session:
            opened = await trip(
                session, "payment", T0, 30, max_hold_s=60, seen_version=0, calls=10, failures=9, last_error="503"
            )
        async with sessions() as session:  # a second worker saw the same failures
            again = await trip(
                session, "payment", T0, 30, max_hold_s=60, seen_version=0, calls=12, failures=12, last_error="503"
            )
        assert opened is not None and again is None
        assert (opened.state, opened.outage_since, opened.retry_at) == ("open", T0, T0 + timedelta(seconds=30))

        async with sessions() as session:
            early = await claim_probe(session, "payment", T0 + timedelta(seconds=5), "w1", 10, seen_version=1)
        assert early is None  # the wait is not over
        later = T0 + timedelta(seconds=31)
        async with sessions() as session:
            probe = await claim_probe(session, "payment", later, "w1", 10, seen_version=1)
        async with sessions() as session:
            rival = await claim_probe(session, "payment", later, "w2", 10, seen_version=1)
        assert probe is not None and (probe.state, probe.probe_by) == ("half_open", "w1") and rival is None

        # The probe failed: open again, the outage still dated from its start, the same alert.
        async with sessions() as session:
            reopened = await trip(
                session,
                "payment",
                later,
                30,
                max_hold_s=60,
                seen_version=probe.version,
                calls=1,
                failures=1,
                last_error="503",
            )
        assert reopened is not None and reopened.state == "open" and reopened.outage_since == T0
        [alert] = await alerts(sessions)
        assert (alert.incident_key, alert.status) == (alert_key("payment"), "open")

        # max_hold_s counts from the outage's start (the reopening kept it).
        assert reopened.hold_until == T0 + timedelta(seconds=60)
        assert reopened.holding(T0 + timedelta(seconds=59))
        assert not reopened.holding(T0 + timedelta(seconds=61))

        async with sessions() as session:
            probe = await claim_probe(session, "payment", T0 + timedelta(seconds=62), "w2", 10, seen_version=3)
        assert probe is not None
        async with sessions() as session:
            assert await close(session, "payment", T0 + timedelta(seconds=63), "probe ok", seen_version=probe.version)
        async with sessions() as session:
            assert not await close(session, "payment", T0, "again", seen_version=probe.version)
            assert (await read_breakers(session))["payment"].state == "closed"
        [alert] = await alerts(sessions)
        assert alert.status == "resolved" and alert.resolution == "probe ok"
    finally:
        await engine.dispose()


async def test_forced_transitions_hold_without_probes_and_are_audited(db_url: str) -> None:
    await state_store.upgrade_async(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    sessions = state_store.session_factory(engine)
    try:
        async with sessions() as session:
            assert await force(session, "shipping", "open", "alice", "carrier maintenance", T0) == (
                "closed",
                "open (forced)",
            )
            view = (await read_breakers(session))["shipping"]
        assert view.forced_by == "alice" and not view.probe_due(T0 + timedelta(days=1))
        assert view.holding(T0 + timedelta(days=30)) and view.hold_until is None  # no time limit on a forced open
        async with sessions() as session:
            assert not await close(session, "shipping", T0, "a call went through", seen_version=view.version)
            assert await force(session, "shipping", "closed", "bob", "done", T0) == ("open (forced)", "closed")
            entries = await audit_for(session, "service:shipping")
        assert [(e.action, e.actor, e.reason) for e in entries] == [
            ("breaker_open", "alice", "carrier maintenance"),
            ("breaker_closed", "bob", "done"),
        ]
        [alert] = await alerts(sessions)
        assert alert.status == "resolved"
    finally:
        await engine.dispose()


async def test_two_workers_share_one_breaker(db_url: str) -> None:
    await state_store.upgrade_async(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    sessions = state_store.session_factory(engine)
    # Held work let go all at once on closing: the staged release that follows a close by default
    # (each call waiting for its turn) is tests/e2e/test_staged_release.py's.
    settings = ResolvedBreaker(
        enabled=True, min_calls=3, failure_rate=0.5, open_s=0.1, sync_s=0.1, release=ReleaseSettings(enabled=False)
    )
    one = ServiceBreaker("inventory", settings, "w1", sessions)
    two = ServiceBreaker("inventory", settings, "w2", sessions)
    try:
        for _ in range(3):
            assert one.admit()
            one.record(False, "503")
        for breaker in (one, two):
            await wait_for(breaker, lambda v: v.state == "open")
        assert not two.admit() and not two.may_poll()  # opened by w1, held for w2 too

        # After open_s one worker claims the probe and lets exactly one call (and one poll) through.
        await wait_for_claim(one, two)
        prober, other = (one, two) if one.view.probe_by == "w1" else (two, one)
        await other.refresh()
        assert prober.may_poll() and not prober.may_poll()
        assert prober.admit() and not prober.admit() and not other.admit()
        prober.record(True)
        for breaker in (one, two):
            await wait_for(breaker, lambda v: v.state == "closed")
        assert one.admit() and two.admit() and two.may_poll()
    finally:
        await engine.dispose()


def test_a_read_older_than_the_view_held_is_not_taken() -> None:
    breaker = ServiceBreaker("inventory", BreakerSettings(enabled=True), "w1", None)
    claimed = BreakerView(service="inventory", state="half_open", probe_by="w1", version=2)
    breaker.update(claimed)
    # A read that began before the claim committed comes back after it.
    breaker.update(BreakerView(service="inventory", state="open", version=1))
    assert breaker.view == claimed


async def test_a_probe_outcome_recorded_while_the_trip_is_read_back_is_written(db_url: str) -> None:
    """The trip's write is followed by a read of the row. A probe whose outcome comes in while
    that read is still on its way (a slow database, a loaded machine) must still close the
    breaker: the read-back is not a write in progress."""
    import asyncio

    from tests.helpers import wait_until

    await state_store.upgrade_async(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    sessions = state_store.session_factory(engine)
    settings = BreakerSettings(enabled=True, min_calls=3, failure_rate=0.5, open_s=0.1, sync_s=0.1)
    breaker = ServiceBreaker("inventory", settings, "w1", sessions)
    reads_released = asyncio.Event()
    real_refresh = breaker.refresh

    async def held_refresh() -> None:
        await reads_released.wait()
        await real_refresh()

    async def claim() -> bool:
        await breaker.maybe_claim_probe()  # not through refresh: that is what is held
        return breaker.view.state == "half_open"

    breaker.refresh = held_refresh  # type: ignore[method-assign]
    try:
        for _ in range(3):
            breaker.record(False, "503")
        opened = await wait_for_row(sessions, lambda v: v.state == "open")
        breaker.update(opened)
        await wait_until(claim, timeout=10, interval=0.05, what="the probe claimed")  # after open_s
        assert breaker.view.state == "half_open" and breaker.view.probe_by == "w1"
        assert breaker.admit()
        breaker.record(True)
        closed = await wait_for_row(sessions, lambda v: v.state == "closed")
        assert closed.version == opened.version + 2  # claimed, then closed by its probe
    finally:
        reads_released.set()
        await engine.dispose()


async def wait_for_row(sessions, ok) -> BreakerView:  # type: ignore[no-untyped-def]
    from tests.helpers import wait_until

    async def read() -> BreakerView:
        async with sessions() as session:
            return (await read_breakers(session)).get("inventory", BreakerView(service="inventory"))

    return await wait_until(read, ok, timeout=10, interval=0.05, what="the shared row")


async def wait_for(breaker: ServiceBreaker, ok) -> BreakerView:  # type: ignore[no-untyped-def]
    from tests.helpers import wait_until

    async def read() -> BreakerView:
        await breaker.refresh()
        return breaker.view

    return await wait_until(read, ok, timeout=10, interval=0.05, what=f"{breaker.worker}'s view")


async def wait_for_claim(*breakers: ServiceBreaker) -> None:
    from tests.helpers import wait_until

    async def claimed() -> bool:
        for breaker in breakers:
            await breaker.refresh()
            await breaker.maybe_claim_probe()
        return any(b.view.state == "half_open" for b in breakers)

    await wait_until(claimed, timeout=10, interval=0.05, what="a probe claimed")


def test_a_call_refused_for_want_of_a_turn_in_a_release_says_so_not_that_the_breaker_is_open() -> None:
    # The refusal's words go to the task's story ("held, <why>"): during a release the breaker is
    # closed, and an operator told it is open would look for an outage that has ended.
    sessions = object()  # a breaker with a shared row; nothing is read or written here
    breaker = ServiceBreaker("inventory", BreakerSettings(enabled=True), "w1", sessions)  # type: ignore[arg-type]
    breaker.view = BreakerView(service="inventory", state="closed", release_since=T0.timestamp())
    assert not breaker.admit()  # no turn taken in the release
    assert "let go in stages" in breaker.refused_why()
    breaker.view = BreakerView(service="inventory", state="open", retry_at=datetime.now(UTC) + timedelta(hours=1))
    assert not breaker.admit()
    assert breaker.refused_why() == "the circuit breaker of its service is open"
