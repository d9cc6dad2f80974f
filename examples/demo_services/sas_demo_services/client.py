"""Talking to a running service process from tests, scripts and the demo."""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import httpx

from sas_demo_services.faults import FaultKind
from sas_demo_services.ledger import LedgerEntry


class RemoteServicesError(Exception):
    """The service refused an admin or ledger request.

    Attributes:
        status: HTTP status.
        error: The ``error`` code of the answer (``"unknown"`` if it had none).
        message: The ``message`` of the answer.
    """

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(f"{status} {error}: {message}")
        self.status = status
        self.error = error
        self.message = message


def admin_headers(admin_token: str | None) -> dict[str, str]:
    """The header an ``/admin`` call carries: ``Authorization: Bearer <token>``."""
    return {"Authorization": f"Bearer {admin_token}"} if admin_token else {}


def _check(response: httpx.Response) -> Any:
    try:
        content = response.json()
    except ValueError:
        content = None
    if response.is_success:
        return content
    if isinstance(content, dict):
        raise RemoteServicesError(response.status_code, str(content.get("error")), str(content.get("message")))
    raise RemoteServicesError(response.status_code, "unknown", response.text[:500])


def _healthy(response: httpx.Response) -> bool:
    if response.status_code != 200:
        return False
    content = response.json()
    return isinstance(content, dict) and content.get("ok") is True


class RemoteServicesAdmin:
    """Async helper for health, fault rules and the ledger of one service process.

    Args:
        base_url: Root URL of the service, such as ``http://127.0.0.1:8081``.
        timeout_s: Timeout of each request.
        http: An existing client to use (left open by :meth:`aclose`); one is made if None.
        admin_token: The services' admin bearer token (``SAS_SERVICES__ADMIN_TOKEN``), sent on
            every ``/admin`` call.
    """

    def __init__(
        self,
        base_url: str,
        timeout_s: float = 10.0,
        http: httpx.AsyncClient | None = None,
        admin_token: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = admin_headers(admin_token)
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout_s)

    async def __aenter__(self) -> RemoteServicesAdmin:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this helper made it."""
        if self._owns_http:
            await self._http.aclose()

    async def health(self) -> bool:
        """Whether ``/healthz`` answers ``{"ok": true}``; False if unreachable."""
        try:
            response = await self._http.get(f"{self.base_url}/healthz")
            return _healthy(response)
        except (httpx.HTTPError, ValueError):
            return False

    async def add_fault(
        self,
        endpoint: str,
        kind: FaultKind,
        *,
        probability: float = 1.0,
        times: int | None = None,
        latency_ms: int | None = None,
        hang_s: float | None = None,
        status: int | None = None,
        error: str | None = None,
        message: str | None = None,
        match_order_id: str | None = None,
        match_order_prefix: str | None = None,
    ) -> str:
        """Add a fault rule (see :class:`sas_demo_services.faults.FaultSpec` for the fields).

        Returns:
            The rule's id.

        Raises:
            RemoteServicesError: If the rule is invalid (422) or faults are disabled (404).
        """
        rule: dict[str, Any] = {"endpoint": endpoint, "kind": kind, "probability": probability, "times": times}
        optional = {
            "latency_ms": latency_ms,
            "hang_s": hang_s,
            "status": status,
            "error": error,
            "message": message,
            "match_order_id": match_order_id,
            "match_order_prefix": match_order_prefix,
        }
        # Leave unset fields out so the service applies its own defaults.
        rule.update({name: value for name, value in optional.items() if value is not None})
        content = _check(await self._http.post(f"{self.base_url}/admin/faults", json=rule, headers=self._auth))
        return str(content["id"])

    async def faults(self) -> list[dict[str, Any]]:
        """The fault rules, with ``remaining`` and ``hits``."""
        return list(_check(await self._http.get(f"{self.base_url}/admin/faults", headers=self._auth))["faults"])

    async def remove_fault(self, fault_id: str) -> bool:
        """Delete one rule; False if there was none with that id."""
        try:
            _check(await self._http.delete(f"{self.base_url}/admin/faults/{fault_id}", headers=self._auth))
        except RemoteServicesError as err:
            if err.error == "fault_not_found":
                return False
            raise
        return True

    async def in_flight(self) -> dict[str, int]:
        """Each idempotency key a request is being served under, and how many requests hold or
        wait for it (a lookup waiting for a forward makes it 2)."""
        return dict(_check(await self._http.get(f"{self.base_url}/admin/in_flight", headers=self._auth))["in_flight"])

    async def clear_faults(self) -> int:
        """Delete every fault rule; returns how many there were."""
        return int(_check(await self._http.delete(f"{self.base_url}/admin/faults", headers=self._auth))["cleared"])

    async def reset(self) -> None:
        """Clear the fault rules and the whole ledger, idempotency store included."""
        _check(await self._http.post(f"{self.base_url}/admin/reset", headers=self._auth))

    async def ledger(self, order_id: str | None = None, idempotency_key: str | None = None) -> list[LedgerEntry]:
        """The ledger in ``seq`` order, optionally filtered."""
        params = {
            name: value
            for name, value in (("order_id", order_id), ("idempotency_key", idempotency_key))
            if value is not None
        }
        content = _check(await self._http.get(f"{self.base_url}/ledger", params=params))
        return [LedgerEntry.model_validate(entry) for entry in content["entries"]]


def probe_health(url: str, timeout_s: float = 1.0) -> bool:
    """One synchronous health check; False on any failure."""
    try:
        return _healthy(httpx.get(f"{url.rstrip('/')}/healthz", timeout=timeout_s))
    except (httpx.HTTPError, ValueError):
        return False


def wait_healthy(url: str, timeout_s: float = 10.0) -> None:
    """Block until the service at ``url`` is healthy.

    Args:
        url: Root URL of the service.
        timeout_s: How long to keep trying.

    Raises:
        TimeoutError: If it is not healthy in time.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if probe_health(url, timeout_s=max(0.1, min(1.0, deadline - time.monotonic()))):
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"remote services at {url} not healthy after {timeout_s:.1f}s")
        time.sleep(0.05)
