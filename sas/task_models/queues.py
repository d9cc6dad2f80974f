"""Where an Agent's activity is queued: one task queue per remote service (a bulkhead in Temporal).

A service's queue is the workflow's own queue with the service's name after a dot
(``sas-tasks.payment``), so every deployment that runs its own workflow queue gets its own
service queues. The name is decided when a task is accepted and recorded in its plan
(``StepPlan.task_queue``): replay never derives it again, and a task accepted before service
queues existed keeps its Agents on the workflow's queue, which every worker still serves.
"""

from __future__ import annotations


def service_of(activity_name: str) -> str:
    """The remote service an Agent calls: the first part of its activity name (``payment.charge``)."""
    service, dot, _ = activity_name.partition(".")
    if not dot or not service:
        raise ValueError(f"{activity_name!r} is not an Agent's activity name (<service>.<action>)")
    return service


def service_queue(task_queue: str, service: str) -> str:
    """The task queue of ``service``'s Agents for workflows on ``task_queue``."""
    return f"{task_queue}.{service}"
