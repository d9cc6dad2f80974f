"""Where the Supervisor acts: what it has decided, carried out once, and what it finds Temporal's
own tools did, made visible.

``apply``: the ``supervisor.apply`` activity, each decision claimed once in the state store and
only then sent, unless one of its ``vetoes`` holds it back (its service's breaker, Temporal's view
of its task); ``outbox``: what is claimed but not yet sent (a signal to
the task's workflow, a clean-up's start), sent and sent again until it is; ``outside_pauses``: a
step paused with Temporal's own tools, not ``sas park``, parked as ``sas park`` would. Outside
this room they are imported from here.
"""

from sas.supervisor.act.apply import ApplyActivities
from sas.supervisor.act.outbox import Outbox, unsent
from sas.supervisor.act.outside_pauses import outside_pauses_in

__all__ = ["ApplyActivities", "Outbox", "outside_pauses_in", "unsent"]
