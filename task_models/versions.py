"""How writes to a step row are ordered, so a late, older write never overwrites a newer one.

The Scheduler numbers its transitions per task (``seq``, deterministic, recorded
in its history). An Agent's writes within one scheduled step are further ordered
by Temporal's attempt number and by phase (started before done). A row is only
updated by a write whose version is greater than the row's; replaying the same
write changes nothing.
"""

from __future__ import annotations

from enum import IntEnum

MAX_ATTEMPTS_PER_SEQ = 2_499  # attempt * 4 + phase must stay below one seq's span


class Phase(IntEnum):
    SCHEDULER = 0
    AGENT_STARTED = 1
    AGENT_DONE = 2


def version_of(seq: int, attempt: int = 0, phase: Phase = Phase.SCHEDULER) -> int:
    """Totally ordered version of a write: (seq, attempt, phase)."""
    return seq * 10_000 + min(attempt, MAX_ATTEMPTS_PER_SEQ) * 4 + int(phase)
