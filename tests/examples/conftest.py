"""The trip example's services, run as their team runs them: a process of their own on loopback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from sas.remote_services.launcher import free_port
from tests.helpers import wait_until


@pytest.fixture(scope="module")
def trip_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("trip-services") / "services.log"
    with open(log, "wb") as out:
        argv = [sys.executable, "-m", "sas_trip.services", "--port", str(port)]
        process = subprocess.Popen(argv, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(wait_until(lambda: _answers(url), timeout=30, what="the trip services"))
        yield url
    finally:
        process.kill()
        process.wait(30)


async def _answers(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            return (await http.get(f"{url}/healthz")).status_code == 200
    except httpx.TransportError:
        return False
