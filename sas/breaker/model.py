"""A remote service's circuit breaker as every process sees it: the shared row's values and
what they mean at a given time. Pure, so the worker's gate, the Supervisor and ``sas services``
all judge "is this service's work held?" the same way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

# A rate no wave grows past, so that a release with no ceiling still counts in finite numbers.
_MOST_PER_SECOND = 1e9

BreakerStateName = Literal["closed", "open", "half_open"]
# The error type of a call the breaker stopped before it left the process (activities/remote.py).
BREAKER_OPEN = "BreakerOpen"


@dataclass(frozen=True)
class BreakerView:
    """One service's breaker row (state_store.tables.Breaker), as read at ``read_at``."""

    service: str
    state: BreakerStateName = "closed"
    since: datetime | None = None
    outage_since: datetime | None = None
    hold_until: datetime | None = None
    retry_at: datetime | None = None
    probe_by: str | None = None
    probe_until: datetime | None = None
    calls: int = 0
    failures: int = 0
    last_error: str | None = None
    forced_by: str | None = None
    version: int = 0
    # The release of the service's held work after it closed (ReleasePlan): when it began and when
    # its waves did (the state store's clock, seconds since the epoch), the calls let through so
    # far and the canaries that answered. None: no release under way.
    release_since: float | None = None
    release_waves_at: float | None = None
    release_let: int = 0
    release_ok: int = 0

    def holding(self, now: datetime) -> bool:
        """Whether the service's work is held (no request reaches it; its steps wait unstarted).

        An operator's forced open holds until forced closed; otherwise an outage holds work until
        ``hold_until`` (its first opening + ``max_hold_s``), and then calls go through again (they
        fail and climb the Supervisor's ladder as without a breaker, or succeed and close it)."""
        if self.state == "closed":
            return False
        if self.forced_by is not None or self.hold_until is None:
            return True
        return now < self.hold_until

    def probe_due(self, now: datetime) -> bool:
        """Whether a worker may claim the next probe now (open and its wait over, or a claimed
        probe whose worker never reported)."""
        if self.forced_by is not None:
            return False
        if self.state == "open":
            return self.retry_at is None or now >= self.retry_at
        if self.state == "half_open":
            return self.probe_until is None or now >= self.probe_until
        return False


@dataclass(frozen=True)
class ReleasePlan:
    """How a service's held work is let go once its breaker closes: ``canaries`` calls alone, then
    waves of ``wave_s`` each, the first at ``first_wave`` calls a second and each next one
    ``growth`` times faster, up to ``up_to`` a second (None: no ceiling).

    The allowance is continuous within a wave (its calls spread over it, not sent at its start),
    and one for every worker: the calls let through are counted in the breaker's shared row, and
    every worker computes the allowance from the same times in that row."""

    canaries: int
    first_wave: float
    growth: float
    wave_s: float
    up_to: float | None

    def rate(self, wave: int) -> float:
        """Calls a second in wave ``wave`` (0 the first)."""
        rate = min(self.first_wave * self.growth ** min(wave, 1_000), _MOST_PER_SECOND)
        return rate if self.up_to is None else min(rate, self.up_to)

    def wave(self, elapsed: float) -> int:
        """The wave under way ``elapsed`` seconds after the waves began."""
        return int(max(elapsed, 0.0) // self.wave_s)

    def at_full_rate(self, wave: int) -> bool:
        """Whether wave ``wave`` runs at the service's normal rate: the waves stop growing there."""
        return self.up_to is not None and self.rate(wave) >= self.up_to

    def allowed(self, elapsed: float | None) -> float:
        """Calls let through, in all, ``elapsed`` seconds after the waves began (None: the
        canaries have not all answered yet)."""
        if elapsed is None:
            return float(self.canaries)
        elapsed = max(elapsed, 0.0)
        total, wave = float(self.canaries), 0
        while elapsed >= self.wave_s and not self.at_full_rate(wave):
            total += self.rate(wave) * self.wave_s
            elapsed -= self.wave_s
            wave += 1
        return total + self.rate(wave) * elapsed

    def drained(self, elapsed: float | None, let: int) -> bool:
        """Whether a whole wave's worth of the allowance went unused: nobody asked for it, so the
        backlog is gone and the release may end."""
        if elapsed is None:
            return False
        return self.allowed(elapsed) - let >= self.rate(self.wave(elapsed)) * self.wave_s

    def wait_s(self, elapsed: float | None, let: int) -> float:
        """How long until one more call is allowed (for the canaries: until they have answered)."""
        if elapsed is None:
            return self.wave_s
        return max((let + 1 - self.allowed(elapsed)) / self.rate(self.wave(elapsed)), 0.0)

    def describe(self, view: BreakerView, now: float, waiting: int | None = None) -> str | None:
        """The release as ``sas services`` shows it, or None when none is under way. ``waiting``:
        the calls still held in the service's queue (Temporal's approximate backlog), which makes
        the count "40 of about 400 let through"; without it, of the calls allowed so far."""
        if view.release_since is None or view.state != "closed":
            return None
        if view.release_waves_at is None:
            shown = f"releasing: {view.release_ok} of {self.canaries} canaries answered"
            return shown if waiting is None else shown + f", {waiting} calls waiting"
        elapsed = now - view.release_waves_at
        wave = self.wave(elapsed)
        of = f"{int(self.allowed(elapsed))} calls" if waiting is None else f"about {view.release_let + waiting}"
        shown = f"releasing: wave {wave + 1} at {self.rate(wave):g}/s, {view.release_let} of {of} let through"
        if self.at_full_rate(wave):
            return shown + ", at full rate until the backlog drains"
        return shown + f", next wave in {self.wave_s - (elapsed - wave * self.wave_s):.0f} s"
