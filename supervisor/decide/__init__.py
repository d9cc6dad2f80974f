"""Where the Supervisor decides: pure functions of what a sweep saw and the time, no I/O, so they
run inside the deterministic Supervisor workflow and what they decide is recorded in its history.

``policy``: what to do about a step that failed or overran its complete-by (the escalation
ladder) and when what Temporal or a breaker says puts that off; ``causes``: which failing steps
are one incident. Outside this room they are imported from here.
"""

from sas.supervisor.decide.causes import Cause, Failing, Group, group
from sas.supervisor.decide.policy import PutOff, breaker_holds, decide, temporal_says_wait

__all__ = ["Cause", "Failing", "Group", "PutOff", "breaker_holds", "decide", "group", "temporal_says_wait"]
