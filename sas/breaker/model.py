"""A remote service's circuit breaker as every process sees it: the shared row's values and
what they mean at a given time. Pure, so the worker's gate, the Supervisor and ``sas services``
all judge "is this service's work held?" the same way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

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
