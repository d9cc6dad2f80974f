"""Where the Supervisor decides: pure functions of what a sweep saw and the time, no I/O, so they
run inside the deterministic Supervisor workflow and what they decide is recorded in its history.

``policy``: what to do about a step that failed or overran its complete-by (the escalation
ladder) and when what Temporal or a breaker says puts that off; ``causes``: which failing steps
are one incident; ``outside``: what is done about a task closed from outside, gone from Temporal
or stuck. Outside this room they are imported from here.
"""

from sas.supervisor.decide.causes import Cause, Failing, Group, group
from sas.supervisor.decide.outside import Closed, closed_from_outside, history_gone, workflow_stuck
from sas.supervisor.decide.policy import PutOff, breaker_holds, decide, temporal_says_wait

__all__ = [
    "Cause",
    "Closed",
    "Failing",
    "Group",
    "PutOff",
    "breaker_holds",
    "closed_from_outside",
    "decide",
    "group",
    "history_gone",
    "temporal_says_wait",
    "workflow_stuck",
]
