"""``free_port``: a port no outgoing connection can take before the server binds it.

The suite once failed with "bind: address already in use" for a dev server's UI port: a port
the OS chose with bind(0) comes from the ephemeral range, where every outgoing connection's
local port comes from too, and on a busy machine one took it first."""

from __future__ import annotations

import socket

from sas_demo_services import launcher
from sas_demo_services.launcher import free_port


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    low, _high = launcher._ephemeral_range()
    ports = set()
    for _ in range(50):
        port = free_port()
        # Bound at once: the tests beside this one draw ports too, and one of them may bind a port
        # that was free when drawn if this waited until all fifty were.
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))
        ports.add(port)
    assert all(10_000 <= port < low for port in ports), sorted(ports)
    assert len(ports) > 40  # drawn at random, not one port handed to every caller


def test_a_port_in_use_is_never_given() -> None:
    held = []
    try:
        for _ in range(200):
            sock = socket.socket()
            sock.bind(("127.0.0.1", free_port()))
            sock.listen()
            held.append(sock)
        taken = {sock.getsockname()[1] for sock in held}
        assert all(free_port() not in taken for _ in range(200))
    finally:
        for sock in held:
            sock.close()
