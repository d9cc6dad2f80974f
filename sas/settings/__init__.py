"""Every setting sas reads, in one place.

Values come from environment variables prefixed ``SAS_`` (nested groups use a
double underscore: ``SAS_TEMPORAL__ADDRESS``), then from a ``.env`` file in the
working directory, then from the defaults below. Processes read them once at
start-up through :func:`get_settings` and pass what they need down; workflow
code never reads settings (that would not be deterministic) - the values it
needs arrive recorded in its history (see ``activities/mirror.py``).

One module per group of settings (``connection``, ``services``, ``supervisor``, ``security``,
``processes``) and ``root`` for ``Settings`` and how it is read; this package re-exports every
name, so ``from sas.settings import Settings`` is how the rest of sas reads them.
"""

from sas.breaker.settings import BreakerSettings
from sas.settings.connection import DatabaseSettings, TemporalSettings, TemporalTLS
from sas.settings.processes import (
    WORKFLOW_QUEUE,
    MetricsSettings,
    OtelSettings,
    ScheduleSettings,
    TaskTypeSettings,
    WorkerSettings,
)
from sas.settings.root import Settings, get_settings, steps_by_key
from sas.settings.security import CallbackSettings, CodecServerSettings, EncryptionSettings, SealSettings
from sas.settings.services import ResolvedService, ServiceSettings, ServicesSettings
from sas.settings.supervisor import SupervisorSettings, TaskLadder, WebhookSettings

__all__ = [
    "WORKFLOW_QUEUE",
    "BreakerSettings",
    "CallbackSettings",
    "CodecServerSettings",
    "DatabaseSettings",
    "EncryptionSettings",
    "MetricsSettings",
    "OtelSettings",
    "ResolvedService",
    "ScheduleSettings",
    "SealSettings",
    "ServiceSettings",
    "ServicesSettings",
    "Settings",
    "SupervisorSettings",
    "TaskLadder",
    "TaskTypeSettings",
    "TemporalSettings",
    "TemporalTLS",
    "WebhookSettings",
    "WorkerSettings",
    "get_settings",
    "steps_by_key",
]
