"""What the Supervisor tells the operators: its alerts, grouped into incidents, and sent.

``raising``: an alert raised once per key, refreshed after and resolved by key, with a log line
for each new one (and each decision's); ``incident_check``: failing steps of one cause
(``sas.supervisor.decide.causes``) made one incident, its tasks' own alerts folded into it;
``webhook``: the ``supervisor.deliver_alerts`` activity, each new or escalated alert POSTed to
the operators' webhook. Outside this room they are imported from here.
"""

from sas.supervisor.alert.incident_check import check_incidents
from sas.supervisor.alert.raising import alert_row, log_alert, log_decision, raise_in, raise_once, resolve_key
from sas.supervisor.alert.webhook import AlertDeliveryActivities

__all__ = [
    "AlertDeliveryActivities",
    "alert_row",
    "check_incidents",
    "log_alert",
    "log_decision",
    "raise_in",
    "raise_once",
    "resolve_key",
]
