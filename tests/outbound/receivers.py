"""A webhook receiver on loopback (127.0.0.1 and, where the machine has it, ::1, same port)
that records every request it gets: the real endpoint a callback or alert is sent to."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from sas_demo_services.launcher import free_port
from tests.helpers import wait_until


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    port: int
    ipv6: bool
    received: list[Received] = field(default_factory=list)
    redirect_to: str | None = None
    answer_bytes: int = 0  # a body this long in each answer (to show sas reads answers with a cap)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def handle(self, request: Request) -> Response:
        self.received.append(Received({k.lower(): v for k, v in request.headers.items()}, await request.body()))
        if self.redirect_to:
            return RedirectResponse(self.redirect_to, status_code=307)
        if self.answer_bytes:
            return Response(b"x" * self.answer_bytes, media_type="application/octet-stream")
        return JSONResponse({"ok": True})


def _listen(family: socket.AddressFamily, host: str, port: int) -> socket.socket | None:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_receiver() -> AsyncIterator[Receiver]:
    port = free_port()
    sockets = [s for s in (_listen(socket.AF_INET, "127.0.0.1", port), _listen(socket.AF_INET6, "::1", port)) if s]
    receiver = Receiver(port, ipv6=len(sockets) == 2)
    app = Starlette(routes=[Route("/hook", receiver.handle, methods=["POST", "GET"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=sockets))
    await wait_until(lambda: asyncio.sleep(0, server.started), what="receiver up")
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
        for sock in sockets:
            sock.close()
