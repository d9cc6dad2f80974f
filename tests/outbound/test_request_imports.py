"""A request through the Agents' HTTP client imports nothing: httpcore asks for ``sniffio`` several
times per request, and without it installed each ask is a failed import that searches the whole
import path (about a quarter of an Agent's CPU per call). sniffio is a runtime dependency."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import httpx


class _CountingFinder:
    """Sits first on ``sys.meta_path`` and counts the imports that reach the import system."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.asked.append(fullname)
        return None  # let the real finders answer


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A keep-alive HTTP/1.1 service on loopback that answers every request with ``{}``."""
    while await reader.readline():
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
    writer.close()


async def test_a_request_through_an_agents_client_imports_nothing() -> None:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    finder = _CountingFinder()
    async with server, httpx.AsyncClient(limits=httpx.Limits(max_connections=4)) as client:
        # The first requests import what a request needs once (encodings, the pool's parts).
        for _ in range(3):
            assert (await client.post(f"http://127.0.0.1:{port}/reserve", json={"sku": "BOOK-1"})).json() == {}
        sys.meta_path.insert(0, finder)
        try:
            for _ in range(20):
                assert (await client.post(f"http://127.0.0.1:{port}/reserve", json={"sku": "BOOK-1"})).json() == {}
        finally:
            sys.meta_path.remove(finder)
    assert finder.asked == []
