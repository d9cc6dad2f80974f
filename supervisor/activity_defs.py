"""The Supervisor's activities as its workflow calls them: each one's name and types, no body.

The workflow references its activities by function
(``workflow.execute_activity_method(ScanDefs.scan, ...)``), never by a string, so the type
checker sees what each takes and returns. It cannot import the classes that do the work
(``sas.supervisor.detect``, ``sas.supervisor.act``, ``sas.supervisor.alert``):
they load SQLAlchemy and httpx, which the workflow modules keep out of the sandbox and out of
its passthrough imports (tests/scale/test_sandbox_imports.py). So each role is declared here
and implemented there by a subclass (``class ScanActivities(ScanDefs)``), which mypy holds to
the declared types; tests/supervisor/test_activity_defs.py holds the registered names to these.
The SDK takes only the name and the result type from a declaration; it never calls one.

The names are recorded in every Supervisor history: renaming one breaks replay.
"""

from __future__ import annotations

from temporalio import activity

from sas.supervisor.models import (
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

_DECLARED_ONLY = "a declaration for the workflow; the worker runs its implementation"


class ScanDefs:
    @activity.defn(name="supervisor.scan")
    async def scan(self, request: ScanInput) -> ScanResult:
        """The steps due, the outbox's size, the alerts whose task recovered (``supervisor/detect/scan.py``)."""
        raise NotImplementedError(_DECLARED_ONLY)


class ApplyDefs:
    @activity.defn(name="supervisor.apply")
    async def apply(self, request: ApplyInput) -> ApplyResult:
        """Claim each decision once, then send it through the outbox (``supervisor/act/apply.py``)."""
        raise NotImplementedError(_DECLARED_ONLY)


class OrphanDefs:
    @activity.defn(name="supervisor.check_orphans")
    async def check_orphans(self, request: OrphanCheckInput) -> OrphanCheckResult:
        """Open tasks whose workflow was closed from outside, is gone or is stuck (``supervisor/detect/orphans.py``)."""
        raise NotImplementedError(_DECLARED_ONLY)


class QueueDefs:
    @activity.defn(name="supervisor.check_queues")
    async def check_queues(self, request: QueueCheckInput) -> QueueCheckResult:
        """Queues nobody polls, growing backlogs, workflows Temporal reports stuck (``supervisor/detect/queue_health.py``)."""
        raise NotImplementedError(_DECLARED_ONLY)


class AlertDeliveryDefs:
    @activity.defn(name="supervisor.deliver_alerts")
    async def deliver_alerts(self) -> DeliveryResult:
        """POST new and escalated alerts to the webhook (``supervisor/alert/webhook.py``)."""
        raise NotImplementedError(_DECLARED_ONLY)
