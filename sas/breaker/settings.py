"""A service's breaker settings, read with the others (``sas.settings``, ``SAS_SERVICES__<NAME>__BREAKER__*``).
They import nothing of sas, so the settings, below every process, can hold them."""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from sas.breaker.model import BreakerView, ReleasePlan


class BreakerSettings(BaseModel):
    """One remote service's circuit breaker: ``SAS_SERVICES__<NAME>__BREAKER__<FIELD>``.

    Each worker counts its own calls to the service over ``window_s``; when at least
    ``min_calls`` of them ended and ``failure_rate`` of those failed (a transient fault: 5xx,
    timeout, unreachable), it opens the breaker for every worker (one row in the state store).
    While open, no request reaches the service and its steps wait in the service's task queue
    without starting an attempt; after ``open_s`` one probe is let through (half-open): it
    closes the breaker or opens it again. Work is held for at most ``max_hold_s`` of one
    outage; then calls go through again and the Supervisor's ladder applies as usual."""

    # Off unless asked for: with it on, a service's outage holds its steps instead of walking them
    # up the Supervisor's ladder, which is a choice to make per service (and what the demo's and
    # most tests' fault scenarios do not expect).
    enabled: bool = Field(default=False, description="Whether this service's calls go through a breaker.")
    window_s: float = Field(default=30.0, ge=1, le=3_600, description="Each worker's counting window.")
    min_calls: int = Field(default=10, ge=1, le=100_000, description="Calls in the window before it may open.")
    failure_rate: float = Field(
        default=0.5, gt=0, le=1, description="Share of failed calls in the window that opens the breaker."
    )
    open_s: float = Field(default=30.0, ge=0.1, le=86_400, description="Time open before the next probe.")
    max_hold_s: float = Field(
        default=1_800.0,
        ge=1,
        le=7 * 86_400,
        description="Longest an outage holds the service's steps; then they run (and fail) as without a breaker.",
    )
    sync_s: float = Field(
        default=1.0, ge=0.1, le=60, description="How often each worker reads the shared state (one small query)."
    )


class ReleaseSettings(BaseModel):
    """How a service's held work is let go again: ``SAS_SERVICES__<NAME>__RELEASE__<FIELD>``.

    When its breaker closes (a good probe, or an operator's ``sas services close``), the service
    does not get its whole backlog at once. ``canaries`` calls go first; once they have answered
    (or a call's timeout has passed with none failed), waves follow, each ``wave_s`` long and
    ``growth`` times the last one's rate, from ``first_wave`` calls a second up to
    ``up_to_per_second`` (the service's ``max_per_second`` if unset; with neither, the waves
    grow until the backlog is gone). A canary that fails opens the breaker again at once. The
    release ends when a whole wave's worth of its allowance went unused: the backlog has drained.
    The allowance is one for every worker (counted in the breaker's shared row)."""

    enabled: bool = Field(default=True, description="Whether held work is released in stages (else all at once).")
    canaries: int = Field(default=3, ge=1, le=1_000, description="Calls let through first, alone.")
    first_wave: float = Field(default=5.0, gt=0, le=100_000, description="Calls a second in the first wave.")
    growth: float = Field(default=2.0, ge=1, le=100, description="Each wave's rate over the last one's.")
    wave_s: float = Field(default=5.0, ge=0.1, le=3_600, description="How long each wave lasts.")
    jitter: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="Each worker waits up to this share more, at random, before asking for the next call's"
        " turn, so that workers do not ask (and send) in step.",
    )
    up_to_per_second: float | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="The service's normal rate, where the waves stop growing; its max_per_second if unset.",
    )

    def plan(self, max_per_second: float | None) -> ReleasePlan:
        """The schedule every worker computes the same allowance from."""
        return ReleasePlan(
            canaries=self.canaries,
            first_wave=self.first_wave,
            growth=self.growth,
            wave_s=self.wave_s,
            up_to=self.up_to_per_second or max_per_second,
        )


class ResolvedBreaker(BreakerSettings):
    """A service's breaker as a worker runs it (``ServicesSettings.service``): its own settings,
    and how its work is released (the service's ``RELEASE__*``, and the rate the waves grow to)."""

    release: ReleaseSettings = ReleaseSettings()
    max_per_second: float | None = None

    @property
    def release_plan(self) -> ReleasePlan | None:
        """The release's schedule, or None when held work is let go all at once."""
        return self.release.plan(self.max_per_second) if self.release.enabled else None


def release_settings(settings: BreakerSettings) -> ReleaseSettings:
    """How the work a breaker held is released (the defaults, for a bare ``BreakerSettings``)."""
    return settings.release if isinstance(settings, ResolvedBreaker) else ReleaseSettings()


def release_plan(settings: BreakerSettings) -> ReleasePlan | None:
    """The release schedule of a breaker's settings, or None when held work is let go all at once."""
    if isinstance(settings, ResolvedBreaker):
        return settings.release_plan
    return ReleaseSettings().plan(None)


def release_of(settings: BreakerSettings, view: BreakerView, waiting: int | None = None) -> str | None:
    """The release under way in ``view`` as ``sas services`` shows it; None: none (or not staged).
    ``waiting``: the calls still held in the service's queue, when known."""
    plan = release_plan(settings)
    return None if plan is None else plan.describe(view, time.time(), waiting)
