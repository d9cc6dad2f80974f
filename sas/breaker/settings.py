"""A service's breaker settings, read with the others (``sas.settings``, ``SAS_SERVICES__<NAME>__BREAKER__*``).
They import nothing of sas, so the settings, below every process, can hold them."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
