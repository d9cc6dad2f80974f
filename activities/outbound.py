"""Every request sas sends to a URL a user gave (task callbacks, the Supervisor's alert webhook):
checked, pinned, signed and bounded, in one place.

- **Checked**: the policy of ``sas/task_models/outbound.py`` (``SAS_OUTBOUND__*``) is applied again
  at send time: a URL accepted earlier, or under other settings, is judged by today's rules.
- **Pinned**: the connection goes to the address that was checked. Each new connection resolves
  the host once, refuses it if any of its addresses is not allowed, and connects to a checked
  address; the URL keeps the name, so the Host header, TLS SNI and the certificate check are
  the name's. A DNS answer that changes between check and connect (rebinding) has nothing to
  change. No proxy from the environment (it would resolve for us), no redirects.
- **Signed**: Standard Webhooks (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``)
  through :func:`signed_headers`, the only signing path; receivers verify with the
  ``standardwebhooks`` package (docs/webhooks.md).
- **Bounded**: what a receiver answers is read up to :data:`RESPONSE_CAP` bytes and dropped, and
  a delivery ends within its timeout in all (not per read). A remote service's answer
  (:func:`post_capped`) is read up to :data:`SERVICE_RESPONSE_CAP`, within its ``within_s``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpcore
import httpx
from pydantic import SecretStr
from standardwebhooks import Webhook

from sas.task_models.outbound import (
    IPAddress,
    OutboundPolicy,
    OutboundRefused,
    check_address,
    check_host_allowed,
    check_url,
    ip_literal,
    is_localhost_name,
)

# A webhook receiver has nothing to tell us beyond its status code.
RESPONSE_CAP = 64 * 1024
# The remote services answer small JSON objects; anything near this is a fault.
SERVICE_RESPONSE_CAP = 1024 * 1024


log = logging.getLogger("sas.outbound")
# Sending unsigned is allowed (a local stack, a receiver on loopback) but said once per process:
# a receiver cannot tell an unsigned delivery from a forged one. Refusing would break every
# setup that has no secret yet, the demo included, for a risk that is the receiver's to take.
_warned_unsigned = False


def warn_unsigned_once(url_host: str) -> bool:
    """Log, once per process, that webhooks go unsigned; True if this call logged it."""
    global _warned_unsigned
    if _warned_unsigned:
        return False
    _warned_unsigned = True
    log.warning(
        "webhooks are sent unsigned: no signing secret is set (SAS_CALLBACKS__SECRET for task callbacks,"
        " the alert webhook's secret for alerts), so a receiver cannot tell them from forgeries;"
        " see docs/webhooks.md",
        extra={"fields": {"host": url_host, "unsigned": True}},
    )
    return True


class ResponseTooLarge(Exception):
    """An answer longer than the cap sas reads."""


@dataclass(frozen=True)
class Delivery:
    """How one POST went: ``ok``; else whether trying again may help, and why it failed."""

    ok: bool
    retryable: bool
    status: int | None = None
    problem: str = ""


def signed_headers(
    secret: SecretStr | None, message_id: str, body: bytes, at: datetime | None = None
) -> dict[str, str]:
    """Standard Webhooks headers for ``body``: signed when a ``whsec_`` secret is set.

    ``message_id`` stays the same across retries of one message, so a receiver drops duplicates;
    the timestamp is signed too, so a captured delivery is refused once it is older than the
    receiver's tolerance (5 minutes in ``standardwebhooks``).
    """
    at = at or datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
    }
    if secret is not None:
        headers["webhook-signature"] = Webhook(secret.get_secret_value()).sign(message_id, at, body.decode())
    return headers


async def resolve_checked(host: str, port: int, policy: OutboundPolicy) -> list[IPAddress]:
    """The addresses of ``host``, every one of them allowed by ``policy``, else OutboundRefused."""
    check_host_allowed(host, policy)
    literal = ip_literal(host)
    if literal is not None:
        check_address(literal, policy, host)
        return [literal]
    if is_localhost_name(host) and not policy.allow_private:
        raise OutboundRefused(f"{host} is loopback")
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        # Not a refusal: DNS may answer on the next try (httpx reports it as a ConnectError).
        raise httpcore.ConnectError(f"{host} does not resolve ({err.strerror or err})") from None
    addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    for address in addresses:
        check_address(address, policy, host)  # one bad address refuses the name: no partial trust
    return addresses


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network layer, connecting only to addresses the policy allows."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async with asyncio.timeout(timeout):
            # resolve_checked returns at least one address or raises.
            *others, final = await resolve_checked(host, port, self._policy)
        for address in others:
            try:
                return await self._connect(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout):
                continue  # the next address may answer
        return await self._connect(final, port, timeout, local_address, socket_options)

    async def _connect(
        self,
        address: IPAddress,
        port: int,
        timeout: float | None,
        local_address: str | None,
        socket_options: Iterable[Any] | None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            str(address), port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise OutboundRefused("a unix socket is not an outbound destination")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, policy: OutboundPolicy, limits: httpx.Limits, verify: ssl.SSLContext | bool) -> None:
        super().__init__(limits=limits, trust_env=False)
        # httpx has no public way to give its transport a network backend; its transport is a thin
        # adapter over this httpcore pool (httpx is pinned below 1.0 in pyproject).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_CheckedBackend(policy),
        )


def pinned_client(
    policy: OutboundPolicy, max_connections: int = 20, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncClient:
    """An HTTP client that connects only where ``policy`` allows, to the address it checked.

    ``verify``: the TLS context that checks receivers' certificates (system CAs by default)."""
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncClient(
        transport=_PinnedTransport(policy, limits, verify), follow_redirects=False, trust_env=False, timeout=10.0
    )


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of a streamed response body (decoded), else ResponseTooLarge."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(f"answered more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class AnswerOverdue(Exception):
    """An answer not in whole by the deadline of its request: sending, the status line, the
    headers and the body together (httpx's own timeouts are per read, which a service that
    trickles its answer never trips)."""


async def post_capped(
    client: httpx.AsyncClient,
    url: str,
    limit: int,
    *,
    method: str = "POST",
    within_s: float | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """POST (or ``method``) and read the answer with a cap; the returned response holds the body read.

    ``within_s``: the whole exchange, from sending to the body's last byte, ends within this
    long, else AnswerOverdue, and the connection is closed (a half-read answer cannot be reused)."""
    if within_s is None:
        return await _exchange_capped(client, url, limit, method, kwargs)
    deadline = asyncio.timeout(within_s)
    try:
        async with deadline:
            return await _exchange_capped(client, url, limit, method, kwargs)
    except TimeoutError:
        if not deadline.expired():
            raise
        raise AnswerOverdue(f"did not answer in whole within {within_s:.1f} s") from None


async def _exchange_capped(
    client: httpx.AsyncClient, url: str, limit: int, method: str, kwargs: dict[str, Any]
) -> httpx.Response:
    # Cancelled anywhere in here (the deadline above), httpcore closes a connection whose
    # exchange did not finish, and the finally blocks close the response being read.
    request = client.build_request(method, url, **kwargs)
    response = await client.send(request, stream=True)
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and "content-encoding" not in response.headers:
        # The usual answer: a declared length, not compressed. HTTP/1.1 framing reads exactly that
        # many bytes, so checking the declaration caps the read; one aread() does the rest.
        try:
            if int(declared) > limit:
                raise ResponseTooLarge(f"answered more than {limit} bytes")
            await response.aread()
        finally:
            await response.aclose()
        return response
    try:
        body = await read_capped(response, limit)
    finally:
        await response.aclose()
    # The body is already decoded: the copy must not claim an encoding or length of the wire form.
    headers = [(k, v) for k, v in response.headers.multi_items() if k not in ("content-encoding", "content-length")]
    return httpx.Response(response.status_code, headers=headers, content=body, request=request)


class WebhookSender:
    """Posts signed JSON to user-given URLs: callbacks (worker) and alert webhooks (Supervisor).

    Its own connection pool, apart from the remote services' (a slow receiver never takes
    connections the Agents need)."""

    def __init__(self, policy: OutboundPolicy, secret: SecretStr | None, max_connections: int = 20) -> None:
        self._policy = policy
        self._secret = secret
        self._client = pinned_client(policy, max_connections)

    async def send(self, url: str, message_id: str, body: bytes, timeout_s: float) -> Delivery:
        """POST ``body`` to ``url`` signed as message ``message_id``; never raises for the receiver's faults.

        ``timeout_s`` bounds the whole delivery, not each read: a receiver that trickles its
        answer is cut off then, and judged by its status if that came."""
        deadline = asyncio.timeout(timeout_s)
        status: int | None = None
        try:
            check_url(url, self._policy)  # scheme and shape; the address is checked as it connects
            if self._secret is None:
                warn_unsigned_once(httpx.URL(url).host)
            async with (
                deadline,
                self._client.stream(
                    "POST", url, content=body, headers=signed_headers(self._secret, message_id, body), timeout=timeout_s
                ) as response,
            ):
                status = response.status_code
                try:
                    await read_capped(response, RESPONSE_CAP)
                except ResponseTooLarge:
                    pass  # the status is all we use; stop reading and drop the connection
        except OutboundRefused as err:
            return Delivery(ok=False, retryable=False, problem=f"refused: {err}")
        except httpx.HTTPError as err:
            return Delivery(ok=False, retryable=True, problem=f"{type(err).__name__}: {err}")
        except TimeoutError:
            if not deadline.expired():
                raise
            if status is None:
                return Delivery(ok=False, retryable=True, problem=f"no answer within {timeout_s:g} s")
            # The status came, the body did not end: dropped with its connection, as above.
        assert status is not None
        if 200 <= status < 300:
            return Delivery(ok=True, retryable=False, status=status)
        if 300 <= status < 400:
            return Delivery(False, False, status, f"HTTP {status}: redirects are not followed")
        return Delivery(False, status >= 500 or status in (408, 425, 429), status, f"HTTP {status}")

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> WebhookSender:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()
