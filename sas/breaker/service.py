"""One circuit breaker per remote service, shared by every worker process through the state store.

Why not a library: pybreaker, aiobreaker and purgatory keep the breaker's state in memory or in
Redis, and their shared backends read (and, for failures, write) that state on every call. Here
the hot path must cost nothing extra: a worker counts its own calls in memory, reads the shared
row every ``sync_s`` (one small query for all services), and writes only on a transition. None of
them either knows of the two things sas needs besides: holding the service's Temporal task queue
while open (``sas/breaker/gate.py``), and letting work through again after the outage has
lasted ``max_hold_s``.

The states (``state_store.tables.Breaker``):

- closed: calls go through. When at least ``min_calls`` of this worker's calls in the last
  ``window_s`` ended and ``failure_rate`` of them failed, the worker opens it (compare-and-set).
- open: no request leaves any worker; the service's steps wait in its task queue unstarted.
  After ``open_s`` one worker claims the probe (half-open).
- half-open: that worker lets one call through. Its success closes the breaker; its failure
  opens it again, for another ``open_s``, keeping when the outage began.

Only what the service itself caused counts as a failure: a 5xx, 408/425/429, a timeout, a
refused connection, an answer that is not one. A business refusal (4xx) is the service working.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas.breaker import rows as store
from sas.breaker.model import BreakerView
from sas.breaker.release import Release
from sas.breaker.settings import release_plan, release_settings

if TYPE_CHECKING:
    from temporalio.common import MetricMeter

    from sas.breaker.settings import BreakerSettings

log = logging.getLogger("sas.breaker")

# A claimed probe that never reports (its worker died, no step was waiting) is free again after
# this long, at least: then another worker may probe.
_MIN_PROBE_FOR_S = 5.0
# The workers' windows shown by `sas services` are written at most this often per service.
_REPORT_EVERY_S = 5.0
_STATE_VALUE = {"closed": 0, "half_open": 1, "open": 2}


def _now() -> datetime:
    return datetime.now(UTC)


class ServiceBreaker:
    """This worker's view of one service's breaker: admits calls, counts their outcomes.

    Everything here runs on the worker's event loop. ``admit`` and ``record`` are the hot
    path: in memory only; a transition they call for is written in the background."""

    def __init__(
        self,
        service: str,
        settings: BreakerSettings,
        worker: str,
        sessions: async_sessionmaker[AsyncSession] | None,
        probe_for_s: float = _MIN_PROBE_FOR_S,
    ) -> None:
        self.service = service
        self.settings = settings
        self.worker = worker
        self._sessions = sessions
        self._probe_for_s = max(probe_for_s, _MIN_PROBE_FOR_S)
        self.view = BreakerView(service=service)
        self._window: deque[tuple[float, bool]] = deque()
        self._reported = (0, 0)
        self._reported_at = 0.0
        self._probe_sent = False  # this worker's probe has been let through (half-open, ours)
        self._probe_polled = False  # the gate has let one poll go for it
        self._writing = False
        self._changed = asyncio.Event()
        self.rejected = 0
        # Once it closes, the work it held is let go in stages (sas/breaker/release.py).
        self.release = Release(
            service, release_plan(settings), sessions, self._probe_for_s, release_settings(settings).jitter
        )
        self._background: set[asyncio.Future[None]] = set()

    @property
    def enabled(self) -> bool:
        """Whether this worker counts calls and makes the automatic transitions."""
        return self.settings.enabled and self._sessions is not None

    def holding(self, now: datetime | None = None) -> bool:
        """Whether the service's work is held now, by the shared row: whichever worker opened it
        (or an operator forcing it), this one holds too, even where its own breaker is off."""
        return self._sessions is not None and self.view.holding(now or _now())

    def _our_probe(self) -> bool:
        return self.view.state == "half_open" and self.view.probe_by == self.worker

    # ------------------------------------------------------------- the hot path

    def admit(self) -> bool:
        """Whether a request may go to the service now (no I/O). While the breaker holds, only
        this worker's one probe is admitted; while a release is under way, only the calls its
        gate took a turn for (``Release.admits``)."""
        if not self.holding():
            if self.release.admits(self.view):
                return True
            self.rejected += 1
            return False
        if self._our_probe() and not self._probe_sent:
            self._probe_sent = True
            return True
        self.rejected += 1
        return False

    def record(self, ok: bool, error: str | None = None) -> None:
        """The outcome of a request that went to the service (``ok``: it answered as a service)."""
        if self.release.at_canaries(self.view):
            if not ok and self.enabled:
                # A canary failing: the service is not back. Opened again at once, the release
                # with it, without waiting for a window's worth of failures.
                self._transition(self._trip(error, canary=True))
                return
            if ok:
                self._in_background(self.release.canary_answered(self.view))
        if not self.enabled:
            return
        now = time.monotonic()
        self._window.append((now, ok))
        self._prune(now)
        view = self.view
        if view.state == "half_open" and self._our_probe() and self._probe_sent:
            self._transition(self._close("its probe went through") if ok else self._trip(error))
        elif view.state != "closed" and ok and not self.holding():
            # Past max_hold_s calls go through again; one that succeeds ends the outage.
            self._transition(self._close("a call went through after the hold ended", release=False))
        elif view.state == "closed" and not ok:
            calls, failures = self.counts()
            if calls >= self.settings.min_calls and failures >= self.settings.failure_rate * calls:
                self._transition(self._trip(error))

    def counts(self) -> tuple[int, int]:
        """Calls and failures in this worker's window."""
        self._prune(time.monotonic())
        return len(self._window), sum(1 for _, ok in self._window if not ok)

    def _prune(self, now: float) -> None:
        horizon = now - self.settings.window_s
        while self._window and self._window[0][0] < horizon:
            self._window.popleft()

    def refused_why(self) -> str:
        """Why ``admit`` refused a call, in the words an operator reads in the task's story: a call
        with no turn in a release under way is not held by an open breaker."""
        if not self.holding() and self.releasing():
            return "its service's held work is being let go in stages, and this call waits its turn"
        return "the circuit breaker of its service is open"

    def retry_in_s(self) -> float:
        """How long until the breaker may let calls through again (a held call's next try)."""
        retry_at = self.view.retry_at
        if retry_at is None:
            return self.settings.open_s
        return min(max((retry_at - _now()).total_seconds(), 1.0), self.settings.open_s)

    # ------------------------------------------------------------- transitions

    def _transition(self, write: Callable[[], Awaitable[None]]) -> None:
        # One transition write at a time: many failures in a row ask to trip once.
        if self._writing:
            return
        self._writing = True
        task = asyncio.ensure_future(self._write_then_read(write))
        task.add_done_callback(self._written)

    async def _write_then_read(self, write: Callable[[], Awaitable[None]]) -> None:
        try:
            await write()
        finally:
            # Free as soon as the row is written, not once it is read back: a probe's outcome
            # recorded while that read is still on its way is a transition of its own.
            self._writing = False
        await self.refresh()

    def _written(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.warning("breaker %s: could not write its transition: %s", self.service, task.exception())

    def _in_background(self, write: Awaitable[None]) -> None:
        task = asyncio.ensure_future(write)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(self._written)

    def _trip(self, error: str | None, canary: bool = False) -> Callable[[], Awaitable[None]]:
        calls, failures = self.counts()
        seen = self.view.version

        async def write() -> None:
            assert self._sessions is not None
            async with self._sessions() as session:
                opened = await store.trip(
                    session,
                    self.service,
                    _now(),
                    self.settings.open_s,
                    max_hold_s=self.settings.max_hold_s,
                    seen_version=seen,
                    calls=calls,
                    failures=failures,
                    last_error=(error or "")[:2000] or None,
                    canary=canary,
                )
            if opened is not None:
                log.warning(
                    "breaker %s opened: %d of %d calls failed; next probe at %s",
                    self.service,
                    failures,
                    calls,
                    opened.retry_at.isoformat(timespec="seconds") if opened.retry_at else "?",
                )

        return write

    def _close(self, why: str, release: bool = True) -> Callable[[], Awaitable[None]]:
        seen = self.view.version

        async def write() -> None:
            assert self._sessions is not None
            async with self._sessions() as session:
                if await store.close(session, self.service, _now(), why, seen_version=seen, release=release):
                    log.warning("breaker %s closed: %s", self.service, why)

        return write

    # ------------------------------------------------------------- shared state

    async def refresh(self) -> None:
        if self._sessions is None:
            return
        async with self._sessions() as session:
            views = await store.read_breakers(session)
        self.update(views.get(self.service, BreakerView(service=self.service)))

    def update(self, view: BreakerView) -> None:
        """Take the shared row as read; a new state or probe owner resets what this worker did."""
        before = self.view
        if view.version < before.version:
            # A read that began before a newer transition this worker already holds (its own
            # write's read-back racing a probe claim): taking it would undo the newer state.
            return
        if (view.state, view.probe_by, view.version) != (before.state, before.probe_by, before.version):
            if view.state != "half_open" or view.probe_by != self.worker or before.version != view.version:
                self._probe_sent = self._probe_polled = False
            if view.state != before.state and view.state in ("open", "closed"):
                self._window.clear()  # an outage's failures do not count against the next one
        self.view = view
        self._changed.set()
        self._changed = asyncio.Event()

    async def maybe_claim_probe(self) -> None:
        """Open past its wait (or a probe nobody reported): claim the probe for this worker."""
        if not self.enabled or not self.view.probe_due(_now()) or self._sessions is None:
            return
        async with self._sessions() as session:
            claimed = await store.claim_probe(
                session, self.service, _now(), self.worker, self._probe_for_s, seen_version=self.view.version
            )
        if claimed is not None:
            log.info("breaker %s half-open: this worker probes", self.service)
            self.update(claimed)

    async def report(self) -> None:
        """This worker's window, for ``sas services``: written only when it changed, and at most
        every ``_REPORT_EVERY_S`` (a display, not a decision: it need not be fresher)."""
        counts = self.counts()
        if counts == self._reported or self._sessions is None:
            return
        if time.monotonic() - self._reported_at < _REPORT_EVERY_S and counts != (0, 0):
            return
        async with self._sessions() as session:
            await store.report_window(session, self.service, self.worker, counts[0], counts[1], _now())
        self._reported, self._reported_at = counts, time.monotonic()

    # ------------------------------------------------------------- the gate

    def may_poll(self) -> bool:
        """Whether the service's activity worker may ask Temporal for a task now: not held, or
        held with this worker's probe claimed and not yet polled for."""
        if not self.holding():
            return True
        if self._our_probe() and not self._probe_polled and not self._probe_sent:
            self._probe_polled = True
            return True
        return False

    def releasing(self) -> bool:
        """Whether a release of held work is under way, which this worker's polls wait their turn in."""
        return self.release.under_way(self.view)

    async def release_turn(self) -> bool:
        """Wait for the next call's turn in the release under way, if any (``Release.turn``)."""
        return await self.release.turn(lambda: self.view, self.refresh)

    async def until_poll_allowed(self) -> None:
        """Wait until ``may_poll``: rechecked at each change of the shared row, and at least every
        ``sync_s`` (a hold also ends by itself at max_hold_s)."""
        while not self.may_poll():
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.sync_s):
                    await changed.wait()


class Breakers:
    """Every service's breaker in this worker, and the loop that keeps them in step with the
    shared rows: one read of all of them per ``sync_s``, a probe claimed when one is due, and
    the windows reported for ``sas services``."""

    def __init__(
        self,
        services: Mapping[str, BreakerSettings],
        worker: str,
        sessions: async_sessionmaker[AsyncSession] | None,
        meter: MetricMeter | None = None,
        probe_for_s: Mapping[str, float] | None = None,
    ) -> None:
        self._sessions = sessions
        self._meter = meter
        self.by_service = {
            name: ServiceBreaker(name, s, worker, sessions, (probe_for_s or {}).get(name, _MIN_PROBE_FOR_S))
            for name, s in services.items()
        }
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def __getitem__(self, service: str) -> ServiceBreaker:
        return self.by_service[service]

    def __iter__(self) -> Iterator[ServiceBreaker]:
        return iter(self.by_service.values())

    @property
    def enabled(self) -> list[ServiceBreaker]:
        return [b for b in self if b.enabled]

    async def __aenter__(self) -> Breakers:
        # Read even when every automatic breaker is off: an operator may force one open.
        if self._sessions is not None:
            await self.sync_once()
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        every = min(b.settings.sync_s for b in self)
        while True:
            await asyncio.sleep(every)
            await self.sync_once()

    async def sync_once(self) -> None:
        """One round: read, claim due probes, report windows. A state store that cannot be reached
        leaves each breaker as it last was (said once, not every round)."""
        assert self._sessions is not None
        try:
            async with self._sessions() as session:
                views = await store.read_breakers(session)
            for breaker in self:
                breaker.update(views.get(breaker.service, BreakerView(service=breaker.service)))
                if breaker.enabled:
                    await breaker.maybe_claim_probe()
                    await breaker.report()
                self._export(breaker)
        except Exception as err:  # noqa: BLE001 - the loop must outlive a database outage
            if not self._failing:
                log.warning("breakers: cannot read the shared state, keeping the last one: %s", err)
            self._failing = True
            return
        if self._failing:
            log.info("breakers: shared state readable again")
        self._failing = False

    def _export(self, breaker: ServiceBreaker) -> None:
        if self._meter is None:
            return
        attrs = {"service": breaker.service}
        self._meter.create_gauge(
            "sas_breaker_state", "Circuit breaker of a remote service: 0 closed, 1 half-open, 2 open"
        ).set(_STATE_VALUE[breaker.view.state], attrs)
        calls, failures = breaker.counts()
        self._meter.create_gauge("sas_breaker_window_calls", "This worker's calls in its breaker window").set(
            calls, attrs
        )
        self._meter.create_gauge("sas_breaker_window_failures", "Of those, failed").set(failures, attrs)
        self._meter.create_gauge("sas_breaker_rejected", "Calls this worker's breaker kept from the service").set(
            breaker.rejected, attrs
        )
