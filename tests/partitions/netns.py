"""Network partitions on one machine: a Linux network namespace for the component that is cut
off, one veth pair per dependency it talks to, and a TCP forwarder on the root side of each pair.

The dependencies (the session's Temporal dev server, the demo services, PostgreSQL) listen on
127.0.0.1, which inside a namespace is the namespace's own loopback. So each dependency gets a
pair of its own (``10.x.y.1`` on the root side, ``10.x.y.2`` inside) and a forwarder listening on
``10.x.y.1`` that relays to the dependency's loopback port: the shared servers stay as they are
(PostgreSQL's ``listen_addresses`` is not ours to change), and a cut on one pair cuts exactly
that dependency. A cut is a blackhole on both ends of the pair (``netem loss 100%`` where the
kernel has netem, else the ``blackhole`` qdisc): packets vanish, nothing is refused or reset, as
when a switch or a firewall drops them. The forwarder's own connections to the dependency stay
up, so the dependency sees what it would see of a partitioned client: connections that go quiet.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from random import randrange

import pytest

from tests.postgres import in_ci


def _ip(*args: str, namespace: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    argv = [*prefix, *args] if args[0] == "tc" else [*prefix, "ip", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


@cache
def _blackhole_qdisc() -> tuple[str, ...] | str:
    """The qdisc that drops every packet on this kernel, or why none can be made here."""
    if os.geteuid() != 0:
        return "not root"
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "no `ip` or `tc` (iproute2)"
    name = f"sasq-{uuid.uuid4().hex[:8]}"
    try:
        made = _ip("netns", "add", name, check=False)
        if made.returncode != 0:
            return f"`ip netns add` failed: {made.stderr.strip()}"
        _ip("link", "add", "sasq0", "netns", name, "type", "veth", "peer", "name", "sasq1", "netns", name)
        for qdisc in (("netem", "loss", "100%"), ("blackhole",)):
            if _ip("tc", "qdisc", "add", "dev", "sasq0", "root", *qdisc, namespace=name, check=False).returncode == 0:
                return qdisc
        return "neither the netem nor the blackhole qdisc is in this kernel"
    except subprocess.CalledProcessError as err:
        return f"veth pairs cannot be made: {err.stderr.strip()}"
    finally:
        _ip("netns", "del", name, check=False)


def require_namespaces() -> tuple[str, ...]:
    """Go on only where namespaces, veth pairs and a blackhole can be made: otherwise skip with
    one line, or fail when running in CI (which can make them)."""
    found = _blackhole_qdisc()
    if isinstance(found, tuple):
        return found
    message = f"network partition tests need root, iproute2 and a blackhole qdisc: {found}"
    if in_ci():
        pytest.fail(f"{message}, and CI=true: these tests must run in CI", pytrace=False)
    pytest.skip(message)


@dataclass
class Link:
    """One veth pair between the root namespace and the cut-off component's, for one dependency."""

    name: str
    outside: str  # the root-side device
    inside: str  # the namespace's device
    outside_ip: str
    inside_ip: str
    cut_now: bool = False


class _Forwarders:
    """TCP relays, on a thread and event loop of their own: the test's loop blocks now and then
    (a database made or dropped in a fixture), and a relay stopped with it would be a cut
    nobody asked for."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="partition-forwarders", daemon=True)
        self._thread.start()
        self._servers: list[asyncio.Server] = []
        self._writers: set[asyncio.StreamWriter] = set()

    def listen(self, host: str, target_host: str, target_port: int) -> int:
        future: Future[int] = asyncio.run_coroutine_threadsafe(self._listen(host, target_host, target_port), self._loop)
        return future.result(30)

    async def _listen(self, host: str, target_host: str, target_port: int) -> int:
        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
            except OSError:
                writer.close()
                return
            self._writers.update((writer, up_writer))
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

        server = await asyncio.start_server(relay, host, 0)
        self._servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            with suppress(OSError, RuntimeError):
                writer.close()

    def close(self) -> None:
        async def stop() -> None:
            for server in self._servers:
                server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            for server in self._servers:
                with suppress(Exception):
                    await asyncio.wait_for(server.wait_closed(), 5)

        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@dataclass
class Namespace:
    """A network namespace of the test's own, with its links; removed at the end of its block."""

    name: str
    qdisc: tuple[str, ...]
    links: dict[str, Link] = field(default_factory=dict)
    _forwarders: _Forwarders = field(default_factory=_Forwarders)

    def connect(self, dependency: str, host: str, port: int) -> tuple[str, int]:
        """A pair of its own for ``dependency`` (listening at ``host:port`` in the root
        namespace): the address and port that reach it from inside the namespace."""
        index = len(self.links)
        token = self.name.rsplit("-", 1)[1]
        outside, inside = f"sp{token}{index}o", f"sp{token}{index}i"
        outside_ip, inside_ip = _free_subnet()
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", self.name)
        _ip("addr", "add", f"{outside_ip}/30", "dev", outside)
        _ip("link", "set", outside, "up")
        _ip("addr", "add", f"{inside_ip}/30", "dev", inside, namespace=self.name)
        _ip("link", "set", inside, "up", namespace=self.name)
        self.links[dependency] = Link(dependency, outside, inside, outside_ip, inside_ip)
        return outside_ip, self._forwarders.listen(outside_ip, host, port)

    def cut(self, dependency: str) -> None:
        """Every packet between the namespace and ``dependency`` dropped, both ways."""
        link = self.links[dependency]
        _ip("tc", "qdisc", "add", "dev", link.outside, "root", *self.qdisc)
        _ip("tc", "qdisc", "add", "dev", link.inside, "root", *self.qdisc, namespace=self.name)
        link.cut_now = True

    def heal(self, dependency: str) -> None:
        link = self.links[dependency]
        _ip("tc", "qdisc", "del", "dev", link.outside, "root")
        _ip("tc", "qdisc", "del", "dev", link.inside, "root", namespace=self.name)
        link.cut_now = False

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def remove(self) -> None:
        self._forwarders.close()
        # Deleting the namespace deletes the devices in it, and with them their root-side peers.
        _ip("netns", "del", self.name, check=False)
        for link in self.links.values():
            _ip("link", "del", link.outside, check=False)


def _free_subnet() -> tuple[str, str]:
    """A /30 in 10.213.0.0/16 no device of this machine has (tests on other xdist workers make
    their pairs at the same time; a random pick among 16384 rarely meets theirs, and a clash
    fails ``ip addr add`` loudly rather than wiring two tests together)."""
    taken = _ip("-4", "-o", "addr", "show").stdout
    while True:
        base = randrange(0, 1 << 14) * 4
        outside = f"10.213.{base >> 8}.{(base & 255) + 1}"
        if f" {outside}/" not in taken:
            return outside, f"10.213.{base >> 8}.{(base & 255) + 2}"


@contextmanager
def namespace() -> Iterator[Namespace]:
    """A fresh namespace (its loopback up), removed with its links and relays however the block
    ends. Its name is unique per test: parallel xdist workers make theirs at the same time."""
    qdisc = require_namespaces()
    name = f"sasp-{uuid.uuid4().hex[:6]}"
    _ip("netns", "add", name)
    made = Namespace(name, qdisc)
    try:
        _ip("link", "set", "lo", "up", namespace=name)
        yield made
    finally:
        made.remove()
