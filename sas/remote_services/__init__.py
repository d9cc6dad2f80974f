"""The remote services the Agents call: inventory, payment and shipping over HTTP.

One Starlette app, run in its own process (``python -m sas.remote_services``), records
every real effect in a SQLite ledger, honours Idempotency-Key, tombstones compensated
keys, and can have faults injected at runtime through ``/admin/faults``.
"""

from __future__ import annotations

from sas.remote_services.app import create_app
from sas.remote_services.client import RemoteServicesAdmin, RemoteServicesError, probe_health, wait_healthy
from sas.remote_services.faults import FaultKind, FaultSpec
from sas.remote_services.launcher import ServiceProcess, ServiceStartError, free_port, start_service_process
from sas.remote_services.ledger import Ledger, LedgerEntry, read_ledger
from sas.remote_services.operations import DECLINED_CARD, OUT_OF_STOCK_SKU
from sas.remote_services.schemas import ENDPOINTS, Endpoint

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
