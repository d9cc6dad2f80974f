"""A hostile HTTP service on loopback, written on the raw socket so that it can misbehave as no
framework lets it: trickle its answer a byte at a time for ever (chunked, or under a declared
length), trickle even its headers, pour out far more than anyone should read. It records, for
each connection, what it was asked, how much it wrote, and whether the client closed it: what a
test asserts is what the service saw, not what the client claims.

It runs on its own event loop in a thread, so that a test can drive it from async code (sas's
client on the test's loop) or from a subprocess (``sas check-service``) alike.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from sas_demo_services import free_port


@dataclass(frozen=True)
class Trickle:
    """200, then one byte of whitespace (JSON may begin with any amount) every ``every_s``, for
    ever: chunked, or under a declared ``Content-Length`` that is never reached."""

    framing: str = "chunked"  # or "length"
    every_s: float = 0.05
    content_type: str = "application/json"


@dataclass(frozen=True)
class TrickleHead:
    """The status line and headers themselves, a byte every ``every_s``, never ending."""

    every_s: float = 0.05


@dataclass(frozen=True)
class Flood:
    """200 with ``size`` bytes under a declared length, written as fast as the client reads."""

    size: int
    content_type: str = "application/octet-stream"


@dataclass(frozen=True)
class Fixed:
    """One whole answer: ``status``, ``headers`` and ``body`` as given."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


Plan = Trickle | TrickleHead | Flood | Fixed


@dataclass
class Connection:
    """One request the service got, and what became of its connection."""

    method: str
    path: str
    written: int = 0  # bytes of the answer written to the socket
    finished: bool = False  # the whole answer was written
    closed: threading.Event = field(default_factory=threading.Event)  # the client closed it


class Hostile:
    """The service: ``plans`` maps a path (no query) to how it answers; any other path is a 404."""

    def __init__(self, plans: Mapping[str, Plan]) -> None:
        self.plans = plans
        self.connections: list[Connection] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hostile-{self.port}", daemon=True)
        self._stopping: asyncio.Event

    def to(self, path: str) -> list[Connection]:
        return [c for c in self.connections if c.path == path]

    def open_to(self, path: str) -> int:
        """How many connections to ``path`` the client has not closed."""
        return sum(not c.closed.is_set() for c in self.to(path))

    # ------------------------------------------------------------------ serving

    def _run(self) -> None:
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self._started.set()
        await self._stopping.wait()
        server.close()
        serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_one(reader, writer)
        except asyncio.CancelledError:
            # Stopped mid-answer. Ended quietly: asyncio's streams report a connection task
            # that ends cancelled as an error in a callback.
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        length = next((int(v) for k, _, v in (x.partition(":") for x in lines[1:]) if k.lower() == "content-length"), 0)
        connection = Connection(method, target.split("?", 1)[0])
        self.connections.append(connection)
        try:
            await reader.readexactly(length)
        except (asyncio.IncompleteReadError, ConnectionError):
            connection.closed.set()
            writer.close()
            return
        # The client sends nothing more while it waits for the answer: the next read that ends
        # is its closing of the connection.
        watching = asyncio.ensure_future(self._watch(reader, connection))
        try:
            await self._answer(self.plans.get(connection.path), writer, connection)
        except (ConnectionError, OSError):
            await watching  # the client went: its end of the socket says so at once
        finally:
            # A whole answer is sent with "Connection: close": one request per connection.
            watching.cancel()
            writer.close()

    @staticmethod
    async def _watch(reader: asyncio.StreamReader, connection: Connection) -> None:
        try:
            while await reader.read(65536):
                pass
        except (ConnectionError, OSError):
            pass
        connection.closed.set()

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, connection: Connection, data: bytes) -> None:
        if connection.closed.is_set():
            raise ConnectionResetError("the client closed the connection")
        writer.write(data)
        await writer.drain()
        connection.written += len(data)

    async def _answer(self, plan: Plan | None, writer: asyncio.StreamWriter, connection: Connection) -> None:
        if plan is None:
            plan = Fixed(b'{"error": "not_found", "message": "no such path"}', status=404)
        if isinstance(plan, TrickleHead):
            for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: ":
                await self._write(writer, connection, bytes([byte]))
                await asyncio.sleep(plan.every_s)
            while True:
                await self._write(writer, connection, b"x")
                await asyncio.sleep(plan.every_s)
        if isinstance(plan, Trickle):
            framing = "Transfer-Encoding: chunked" if plan.framing == "chunked" else "Content-Length: 1000000"
            await self._write(
                writer,
                connection,
                f"HTTP/1.1 200 OK\r\nContent-Type: {plan.content_type}\r\n{framing}\r\n\r\n".encode(),
            )
            while True:
                await self._write(writer, connection, b"1\r\n \r\n" if plan.framing == "chunked" else b" ")
                await asyncio.sleep(plan.every_s)
        if isinstance(plan, Flood):
            await self._write(
                writer,
                connection,
                f"HTTP/1.1 200 OK\r\nContent-Type: {plan.content_type}\r\nContent-Length: {plan.size}\r\n"
                "Connection: close\r\n\r\n".encode(),
            )
            chunk = b"x" * 65536
            left = plan.size
            while left:
                await self._write(writer, connection, chunk[:left])
                left -= min(left, len(chunk))
            connection.finished = True
            return
        assert isinstance(plan, Fixed)
        headers = "".join(f"{k}: {v}\r\n" for k, v in plan.headers)
        await self._write(
            writer,
            connection,
            f"HTTP/1.1 {plan.status} Whatever\r\nContent-Type: {plan.content_type}\r\n"
            f"Content-Length: {len(plan.body)}\r\nConnection: close\r\n{headers}\r\n".encode()
            + plan.body,
        )
        connection.finished = True

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(30):
            raise AssertionError(f"the hostile service on port {self.port} did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(30)


@contextmanager
def hostile(plans: Mapping[str, Plan]) -> Iterator[Hostile]:
    """The hostile service, serving ``plans`` until the block ends."""
    service = Hostile(plans)
    service.start()
    try:
        yield service
    finally:
        service.stop()
