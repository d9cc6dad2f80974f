"""The demo's remote services, which the order example's Agents call: inventory, payment and
shipping over HTTP. Not part of sas (its wheel does not hold them): they play the outside world.

One Starlette app, run in its own process (``python -m sas_demo_services``), records
every real effect in a SQLite ledger, honours Idempotency-Key, tombstones compensated
keys, and can have faults injected at runtime through ``/admin/faults``.
"""

from __future__ import annotations

from sas_demo_services.app import create_app
from sas_demo_services.client import RemoteServicesAdmin, RemoteServicesError, probe_health, wait_healthy
from sas_demo_services.faults import FaultKind, FaultSpec
from sas_demo_services.launcher import ServiceProcess, ServiceStartError, free_port, start_service_process
from sas_demo_services.ledger import Ledger, LedgerEntry, read_ledger
from sas_demo_services.operations import DECLINED_CARD, OUT_OF_STOCK_SKU
from sas_demo_services.schemas import ENDPOINTS, Endpoint

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
