"""The remote services the Agents call: inventory, payment and shipping over HTTP.

One Starlette app, run in its own process (``python -m remote_services``), records
every real effect in a SQLite ledger, honours Idempotency-Key, tombstones compensated
keys, and can have faults injected at runtime through ``/admin/faults``.
"""

from __future__ import annotations

from remote_services.app import create_app
from remote_services.client import RemoteServicesAdmin, RemoteServicesError, probe_health, wait_healthy
from remote_services.faults import FaultKind, FaultSpec
from remote_services.launcher import ServiceProcess, ServiceStartError, free_port, start_service_process
from remote_services.ledger import Ledger, LedgerEntry, read_ledger
from remote_services.operations import DECLINED_CARD, OUT_OF_STOCK_SKU
from remote_services.schemas import ENDPOINTS, Endpoint

__all__ = [
    "DECLINED_CARD",
    "ENDPOINTS",
    "OUT_OF_STOCK_SKU",
    "Endpoint",
    "FaultKind",
    "FaultSpec",
    "Ledger",
    "LedgerEntry",
    "RemoteServicesAdmin",
    "RemoteServicesError",
    "ServiceProcess",
    "ServiceStartError",
    "create_app",
    "free_port",
    "probe_health",
    "read_ledger",
    "start_service_process",
    "wait_healthy",
]
