"""How writes to a step row are ordered, so a late, older write never overwrites a newer one.

Each transition of the Scheduler gets a *stamp*: the workflow's own clock in
milliseconds (``workflow.now()``, recorded in its history, so a replay computes the
same stamps), bumped by one when two transitions share a millisecond. Stamps
therefore grow within a run *and across the runs of one task*: after
``temporal workflow reset`` the new run's transitions are stamped later than
anything the old run wrote, whichever event the reset went back to, so its writes
win. (Numbering transitions 1, 2, 3… would restart below the old run's numbers
after a reset to the first workflow task, and the new run's writes would be
silently dropped.)

An Agent's writes within one transition are further ordered by Temporal's attempt
number and by phase (started before done). A row is only updated by a write whose
version is greater than the row's; replaying the same write changes nothing.
"""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum

MAX_ATTEMPTS_PER_STAMP = 2_499  # attempt * 4 + phase must stay below one stamp's span
_SPAN = 10_000
# Stamps of the clean-up workflow (which undoes a task whose workflow died) start here, far
# above any clock stamp (4e14 ms is the year 14,700), so the dead workflow's late writes never win.
CLEANUP_STAMP_BASE = 400_000_000_000_000


class Phase(IntEnum):
    SCHEDULER = 0
    AGENT_STARTED = 1
    AGENT_DONE = 2


def version_of(stamp: int, attempt: int = 0, phase: Phase = Phase.SCHEDULER) -> int:
    """Totally ordered version of a write: (stamp, attempt, phase). Fits a signed 64-bit column."""
    return stamp * _SPAN + min(attempt, MAX_ATTEMPTS_PER_STAMP) * 4 + int(phase)


def next_stamp(previous: int, now: datetime) -> int:
    """The stamp of the next transition: the clock in ms, never below ``previous + 1``."""
    return max(previous + 1, int(now.timestamp() * 1000))


CLEANUP_VERSION = version_of(CLEANUP_STAMP_BASE)
