"""Is it ready? Asked of each part the way it answers for itself: Temporal through its gRPC health
service (``check_health``), an HTTP service through ``/healthz``. An open port only says a socket
is listening, not that the server behind it serves."""

from __future__ import annotations

import asyncio
import concurrent.futures
from datetime import timedelta

import httpx
from temporalio.service import ConnectConfig, RPCError, ServiceClient


async def temporal_healthy(address: str, timeout_s: float = 2.0) -> bool:
    """Whether the Temporal frontend at ``address`` (host:port, no TLS) reports itself serving."""
    try:
        service = await asyncio.wait_for(ServiceClient.connect(ConnectConfig(target_host=address)), timeout_s)
        return await service.check_health(timeout=timedelta(seconds=timeout_s))
    except (RuntimeError, RPCError, TimeoutError):
        # RuntimeError: temporalio's bridge could not connect (nothing there yet).
        return False


def temporal_ready(address: str, timeout_s: float = 2.0) -> bool:
    """``temporal_healthy`` for synchronous callers, on or off an event loop (a thread of its own)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, temporal_healthy(address, timeout_s)).result()


def http_ready(base_url: str, timeout_s: float = 1.0) -> bool:
    """Whether ``GET <base_url>/healthz`` answers 200."""
    try:
        return httpx.get(f"{base_url.rstrip('/')}/healthz", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


async def http_healthy(base_url: str, timeout_s: float = 1.0) -> bool:
    """``http_ready`` for callers on an event loop."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            return (await http.get(f"{base_url.rstrip('/')}/healthz")).status_code == 200
    except httpx.HTTPError:
        return False
