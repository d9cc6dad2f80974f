"""What the Supervisor looks for, one sweep activity each, and the looks they share.

``scan``: the ``supervisor.scan`` activity, the steps due (failed, or past their complete-by)
that the workflow decides on; ``orphans``: ``supervisor.check_orphans``, tasks the mirror says
are open whose workflow was closed from outside, is gone or is stuck, those Temporal closed
lately first (``closed``), with a reset run followed by itself (``resets``); ``queue_health``:
``supervisor.check_queues``, task queues nobody polls
or whose backlog grows, with the workflows Temporal itself reports stuck
(``reported_problems``). What they find is decided on, acted on or alerted on in the rooms
below. Outside this room they are imported from here.
"""

from sas.supervisor.detect.orphans import OrphanActivities
from sas.supervisor.detect.queue_health import QueueActivities
from sas.supervisor.detect.scan import ScanActivities

__all__ = ["OrphanActivities", "QueueActivities", "ScanActivities"]
