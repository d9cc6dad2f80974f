"""Where sas may send a request a user asked for (a task's ``callback_url``, the alert webhook):
the one policy, checked when the URL is accepted and again when it is sent.

Pure checks only (no httpx), so the task input models can use them at the boundary and the
workflow sandbox can import them. The sender that pins the connection to the checked address
is ``activities/outbound.py``.

What is refused:
- any scheme but https (and http when ``allow_http``); a user name or password in the URL;
  characters outside RFC 3986 (a parser differential is how filters are bypassed);
- a host outside ``allowed_hosts``, when that list is set;
- an address that is not public: loopback, link-local (169.254.169.254, the cloud metadata
  service), private, shared (100.64/10), multicast, reserved, unspecified; in every notation
  the C resolver accepts (``0x7f000001``, ``2130706433``, ``017700000001``, ``127.1``,
  ``[::ffff:127.0.0.1]``, ``[::1]``, 6to4 and NAT64 wrappings) and for names, every address
  they resolve to (``localhost`` without asking, RFC 6761).
``allow_private`` lets loopback and private addresses through, for a stack on one machine
(tests, ``sas demo``, ``sas up``); link-local, multicast, reserved and unspecified stay refused.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationInfo, field_validator

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# The key under which a client passes the policy to ``Model.model_validate(..., context=...)``.
OUTBOUND_CONTEXT = "outbound_policy"

# RFC 3986 unreserved, reserved and '%': nothing else may appear in an outbound URL.
_URL_CHARS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_BSD_PART = re.compile(r"^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")


class OutboundRefused(ValueError):
    """An outbound URL or address the policy does not allow; the message says which rule."""


class OutboundPolicy(BaseModel):
    """``SAS_OUTBOUND__*``: where callbacks and alert webhooks may go (no SSRF; docs/webhooks.md)."""

    allow_http: bool = Field(default=False, description="Also allow plain http:// URLs (https only if false).")
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description='Only these hosts (JSON list; "*.example.com" covers its subdomains); empty = any public host.',
    )
    allow_private: bool = Field(
        default=False,
        description="Local development only: let URLs reach loopback and private addresses (tests, sas demo, sas up).",
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        cleaned = []
        for host in hosts:
            name = host.strip().lower().rstrip(".")
            bare = name.removeprefix("*.")
            if not bare or not re.fullmatch(r"[a-z0-9.\-\[\]:]+", bare):
                raise ValueError(f"allowed host {host!r}: expected a host name like hooks.example.com or *.example.com")
            cleaned.append(name)
        return cleaned


@dataclass(frozen=True)
class Target:
    """A checked URL's parts: the connection goes to ``host``:``port``."""

    scheme: str
    host: str
    port: int
    address: IPAddress | None  # set when the host is an address literal, in whatever notation


def check_url(url: str, policy: OutboundPolicy | None = None, *, resolve: bool = False) -> Target:
    """Check ``url`` against ``policy`` and return where it points.

    Without a policy only its shape is checked (http or https, a host, no credentials): that is
    what a workflow can check deterministically. ``resolve`` also asks the system resolver for
    a name's addresses and checks each (blocking: for clients, not for an event loop).

    Raises:
        OutboundRefused: The URL is malformed or the policy forbids it; the message says why.
    """
    target = _parse(url)
    if policy is None:
        return target
    if target.scheme == "http" and not policy.allow_http:
        raise OutboundRefused(f"{url!r}: only https:// is allowed (SAS_OUTBOUND__ALLOW_HTTP=true allows http)")
    check_host_allowed(target.host, policy)
    if target.address is not None:
        check_address(target.address, policy, target.host)
    elif is_localhost_name(target.host) and not policy.allow_private:
        raise OutboundRefused(f"{target.host} is loopback")
    elif resolve:
        try:
            infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except OSError as err:
            raise OutboundRefused(f"{target.host} does not resolve ({err.strerror or err})") from None
        for info in infos:
            check_address(ipaddress.ip_address(str(info[4][0]).split("%")[0]), policy, target.host)
    return target


def check_host_allowed(host: str, policy: OutboundPolicy) -> None:
    """Refuse a host outside a non-empty ``allowed_hosts``."""
    if not policy.allowed_hosts:
        return
    name = host.lower().rstrip(".")
    for allowed in policy.allowed_hosts:
        if name == allowed or (allowed.startswith("*.") and name.endswith(allowed[1:])):
            return
    raise OutboundRefused(f"{host} is not in SAS_OUTBOUND__ALLOWED_HOSTS")


def check_address(address: IPAddress, policy: OutboundPolicy, host: str | None = None) -> None:
    """Refuse an address that is not public (unless ``allow_private`` permits its kind)."""
    shown = host if host is None or host == str(address) else f"{host} ({address})"
    embedded = _embedded_ipv4(address)
    if embedded:
        # ::ffff:127.0.0.1 and friends reach the IPv4 address inside them: that one is judged.
        for inner in embedded:
            check_address(inner, policy, host or str(address))
        return
    kind = _never_allowed(address)
    if kind is None and not policy.allow_private:
        kind = _private(address)
    if kind is not None:
        raise OutboundRefused(f"{shown or address} is {kind}; sas sends only to public addresses")


def ip_literal(host: str) -> IPAddress | None:
    """``host`` as an address if it is one in any notation the C resolver takes, else None.

    ``inet_aton`` (and so ``getaddrinfo``) reads ``0x7f000001``, ``2130706433``,
    ``017700000001`` and ``127.1`` as 127.0.0.1; written out here so that no libc call is
    needed where the workflow sandbox imports this.
    """
    text = host.strip("[]").rstrip(".")
    try:
        return ipaddress.ip_address(text.split("%")[0])  # an IPv6 zone id does not change the address
    except ValueError:
        pass
    parts = text.split(".")
    if not 1 <= len(parts) <= 4 or not all(_BSD_PART.match(p) for p in parts):
        return None
    values = [_bsd_number(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = last
    for i, v in enumerate(head):
        number += v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def validate_outbound_url(value: str | None, info: ValidationInfo) -> str | None:
    """A pydantic field check: the shape always; the policy too when the caller passes one as
    ``model_validate(data, context=outbound_context(policy))`` (``sas submit`` does)."""
    if value is None:
        return None
    context: dict[str, Any] = info.context or {}
    policy = context.get(OUTBOUND_CONTEXT)
    check_url(value, policy, resolve=policy is not None)
    return value


def outbound_context(policy: OutboundPolicy) -> dict[str, Any]:
    """The validation context that makes the input models check URLs against ``policy``."""
    return {OUTBOUND_CONTEXT: policy}


def _parse(url: str) -> Target:
    if not _URL_CHARS.match(url):
        raise OutboundRefused(
            "the URL may hold only RFC 3986 characters (no spaces, backslashes or non-ASCII; punycode a name)"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise OutboundRefused(f"not a valid URL: {err}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise OutboundRefused(f"must be an http(s) URL, got scheme {scheme or 'none'!r}")
    if parts.username is not None or parts.password is not None:
        raise OutboundRefused("the URL must not carry a user name or password")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise OutboundRefused("the URL has no host")
    if port == 0:
        raise OutboundRefused("port 0 is not a destination")
    return Target(scheme, host, port or (443 if scheme == "https" else 80), ip_literal(host))


def _bsd_number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part[0] == "0":
        return int(part, 8)
    return int(part)


def is_localhost_name(host: str) -> bool:
    """``localhost`` and its subdomains are loopback whatever DNS says (RFC 6761)."""
    name = host.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def _embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found.append(address.teredo[1])
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def _never_allowed(address: IPAddress) -> str | None:
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if address.is_link_local:
        return "link-local"
    if address.is_reserved and not address.is_loopback:
        return "reserved"  # ::1 sits in the reserved ::/8 but is plain loopback
    return None


def _private(address: IPAddress) -> str | None:
    if address.is_loopback:
        return "loopback"
    if address.is_private:
        return "private"
    if not address.is_global:
        return "not a public address"
    return None
