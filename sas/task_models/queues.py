"""Where an Agent's activity is queued: on the workflow's own queue, or on a queue of its
service's own (a bulkhead in Temporal) where the service's settings ask for one.

A service's own queue is the workflow's queue with the service's name after a dot
(``sas-tasks.payment``), so every deployment that runs its own workflow queue gets its own
service queues. A service gets one when its settings limit it (``max_concurrency``,
``max_per_second``), give it a breaker, or say ``own_queue``: its waiting calls then wait in
Temporal, holding none of the workflow worker's slots, and its workers can be scaled on its
backlog. Any other service's Agents share the workflow's queue, as a plain Temporal worker's
activities do: the worker that completes a workflow task is handed the activity it scheduled in
the same answer (eager dispatch), with no trip through matching - what the per-service queue
costs (docs/benchmarks.md, section 1).

The queue is decided when a task is accepted and recorded in its plan (``StepPlan.task_queue``,
None for the workflow's own): replay never derives it again, and every worker serves both kinds,
so a plan made under other settings still runs.

A service sharing the workflow's queue keeps its bulkhead there too: a call that finds every one
of its service's slots busy, or its breaker holding, is not kept waiting in a slot of the
workflow worker's. It refuses at once (``SLOTS_FULL``, ``BREAKER_OPEN``), spending no attempt,
and the Scheduler starts it again on the service's own queue (``workflows/shell/agents.py``),
where it waits in Temporal for the service's own worker.
"""

from __future__ import annotations

# The error type of a call that found every slot of its service busy on a queue it shares.
SLOTS_FULL = "ServiceSlotsFull"


# What a plan records in place of an Agent's name for a child step and a wait (task_types/steps.py).
_SAS_OWN = ("child.", "wait.")


def service_of(activity_name: str) -> str:
    """The remote service an Agent calls: its activity name but the last part (``payment.charge``,
    ``north.flights.book`` for a team's own). What a plan records in place of an Agent for a child
    step or a wait (``child.<type>``, ``wait.<signal>``) is sas's own: ``child``, ``wait``."""
    if activity_name.startswith(_SAS_OWN):
        return activity_name.partition(".")[0]
    service, dot, _ = activity_name.rpartition(".")
    if not dot or not service:
        raise ValueError(f"{activity_name!r} is not an Agent's activity name (<service>.<action>)")
    return service


def service_queue(task_queue: str, service: str) -> str:
    """The task queue of ``service``'s Agents for workflows on ``task_queue``."""
    return f"{task_queue}.{service}"


def agent_queue(task_queue: str, service: str, own_queue: bool) -> str | None:
    """Where the plan puts ``service``'s Agents: its own queue, or None for the workflow's."""
    return service_queue(task_queue, service) if own_queue else None
