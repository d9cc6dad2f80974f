"""When Temporal shows an activity paused: the one rule that ``sas park``, ``sas retry`` and the
Supervisor read.

An activity an operator paused (``sas park``, ``temporal activity pause``, the UI) starts no
further attempt until it is unpaused; one whose pause was asked for while an attempt runs is
paused as far as any decision goes, since that attempt hangs up at its next heartbeat. The task
client and the Supervisor both ask this, so neither imports the other to know it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import PendingActivityState

if TYPE_CHECKING:
    from temporalio.api.workflow.v1 import PendingActivityInfo

PAUSED = (
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED,
    PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED,
)


def is_paused(activity: PendingActivityInfo) -> bool:
    """Whether Temporal shows ``activity`` paused (or its pause asked for)."""
    return activity.state in PAUSED
