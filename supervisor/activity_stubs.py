"""The Supervisor's activities as its workflow sees them: each one's name and types, no body.

The workflow references its activities by function (``workflow.execute_activity(scan, ...)``),
never by a string, so the type checker sees what each takes and returns. It cannot import the
classes that do the work (``supervisor/scan.py``, ``apply.py``, ``orphans.py``, ``queues.py``,
``alert_delivery.py``): they load SQLAlchemy and httpx, which the workflow modules keep out of
the sandbox and out of its passthrough imports (tests/scale/test_sandbox_imports.py). So these
declarations carry the registered names and types - tests/supervisor/test_activity_stubs.py
holds them to what the worker registers - and the SDK takes only the name and the result type
from them; it never calls them.

The names are recorded in every Supervisor history: renaming one breaks replay.
"""

from __future__ import annotations

from temporalio import activity

from supervisor.models import (
    ApplyInput,
    ApplyResult,
    DeliveryResult,
    OrphanCheckInput,
    OrphanCheckResult,
    QueueCheckInput,
    QueueCheckResult,
    ScanInput,
    ScanResult,
)

_DECLARED_ONLY = "a declaration for the workflow; the worker runs the implementation"


@activity.defn(name="supervisor.scan")
async def scan(request: ScanInput) -> ScanResult:
    """The steps due, the outbox's size, the alerts whose task recovered (``supervisor/scan.py``)."""
    raise NotImplementedError(_DECLARED_ONLY)


@activity.defn(name="supervisor.apply")
async def apply(request: ApplyInput) -> ApplyResult:
    """Claim each decision once, then send it through the outbox (``supervisor/apply.py``)."""
    raise NotImplementedError(_DECLARED_ONLY)


@activity.defn(name="supervisor.check_orphans")
async def check_orphans(request: OrphanCheckInput) -> OrphanCheckResult:
    """Open tasks whose workflow was closed from outside, is gone, or is stuck (``supervisor/orphans.py``)."""
    raise NotImplementedError(_DECLARED_ONLY)


@activity.defn(name="supervisor.check_queues")
async def check_queues(request: QueueCheckInput) -> QueueCheckResult:
    """Queues nobody polls, growing backlogs, workflows Temporal reports stuck (``supervisor/queues.py``)."""
    raise NotImplementedError(_DECLARED_ONLY)


@activity.defn(name="supervisor.deliver_alerts")
async def deliver_alerts() -> DeliveryResult:
    """POST new and escalated alerts to the webhook (``supervisor/alert_delivery.py``)."""
    raise NotImplementedError(_DECLARED_ONLY)
