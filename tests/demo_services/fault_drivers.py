"""One way to drive each service that injects faults - the demo services (inventory, payment,
shipping), the trip example's airline and the payout example's bank - over real HTTP: a forward
call under a key, its lookup, a fault rule scoped to one key, and the service's own ledger, so
that one test states the contract's promises for every fault kind of every service."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import httpx

from sas_demo_services import FaultKind, RemoteServicesAdmin

# What a fault leaves behind, as each service promises it (docs/http-contract.md, "the
# services' faults"): "effect" the forward was performed and the lookup names it, "none" nothing
# was done and the lookup's "nothing" voids the key.
Left = Literal["effect", "none"]


@dataclass(frozen=True)
class Kind:
    """A fault kind as one service injects it.

    Attributes:
        name: The service's name for it.
        left: What the forward it hits leaves.
        status: The status of the answer it gives (the answer to a forward it hits).
    """

    name: str
    left: Left
    status: int


DEMO_KINDS = {
    "latency": Kind("latency", "effect", 200),
    "transient": Kind("transient", "none", 503),
    "hang": Kind("hang", "none", 504),
    "permanent": Kind("permanent", "none", 422),
    "down": Kind("down", "none", 503),
    "lost_response": Kind("lost_response", "effect", 500),
    "garbage": Kind("garbage", "none", 200),
}
EXAMPLE_KINDS = {
    "latency": Kind("latency", "effect", 200),
    "unavailable": Kind("unavailable", "none", 503),
    "lost_response": Kind("lost_response", "effect", 500),
}


class Driver:
    """A service's forward call, its lookup, its fault rules and its ledger, for one key at a time.

    Args:
        http: A client at the service's base URL (with the admin token, for the demo services).
    """

    kinds: ClassVar[dict[str, Kind]] = {}
    id_field = "id"
    forward_path = "/"
    lookup_path = "/"
    # Whether the service shows a lookup waiting for a key (the demo services' in_flight view).
    shows_waiting = False

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    def body(self, task: str) -> dict[str, Any]:
        raise NotImplementedError

    async def forward(self, task: str, key: str) -> httpx.Response:
        return await self.http.post(self.forward_path, json=self.body(task), headers={"Idempotency-Key": key})

    async def lookup(self, key: str) -> httpx.Response:
        return await self.http.get(self.lookup_path, params={"idempotency_key": key})

    def looked_up(self, answer: httpx.Response) -> str | None:
        """The id the lookup named; None for "nothing" (a 200 with the id null, or a 404)."""
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, answer.text
        found = answer.json()[self.id_field]
        return None if found is None else str(found)

    async def fault(self, task: str, kind: str, *, hold_s: float | None = None) -> str:
        """One fault of ``kind`` on the next forward of ``task``, held ``hold_s`` under its key
        first; returns the rule's handle."""
        raise NotImplementedError

    async def hits(self, rule: str) -> int:
        raise NotImplementedError

    async def lift(self, rule: str) -> None:
        """End the hold of the requests the rule holds (where the service can; else it runs out)."""

    async def waiting(self, key: str) -> bool:
        """Whether a second request (the lookup) is seen waiting for ``key``."""
        return False

    async def effects(self, task: str, key: str) -> list[str]:
        """The ids of the forward effects in the service's ledger under ``key``."""
        raise NotImplementedError


class DemoDriver(Driver):
    """One of the demo services, in its own process; its rules scoped by ``match_order_id``."""

    kinds: ClassVar[dict[str, Kind]] = DEMO_KINDS
    shows_waiting = True
    service = ""
    action = ""

    def __init__(self, http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
        super().__init__(http)
        self.admin = admin
        self.forward_path = f"/{self.service}/{self.action}"
        self.lookup_path = f"/{self.service}/lookup"

    async def fault(self, task: str, kind: str, *, hold_s: float | None = None) -> str:
        options: dict[str, Any] = {"latency_ms": int(hold_s * 1000)} if hold_s is not None else {}
        if kind == "latency":
            options.setdefault("latency_ms", 50)
        if kind == "hang":
            # A hang holds its request by itself; one that runs out answers 504, with no effect.
            options = {"hang_s": hold_s if hold_s is not None else 0.2}
        return await self.admin.add_fault(
            f"{self.service}.{self.action}", cast(FaultKind, kind), times=1, match_order_id=task, **options
        )

    async def hits(self, rule: str) -> int:
        return int(next(r["hits"] for r in await self.admin.faults() if r["id"] == rule))

    async def lift(self, rule: str) -> None:
        await self.admin.remove_fault(rule)

    async def waiting(self, key: str) -> bool:
        return (await self.admin.in_flight()).get(key) == 2

    async def effects(self, task: str, key: str) -> list[str]:
        entries = await self.admin.ledger(idempotency_key=key)
        return [e.provider_id or "" for e in entries if e.service == self.service and e.action == self.action]


class Inventory(DemoDriver):
    service, action, id_field = "inventory", "reserve", "reservation_id"

    def body(self, task: str) -> dict[str, Any]:
        return {"order_id": task, "sku": "SKU-1", "quantity": 1}


class Payment(DemoDriver):
    service, action, id_field = "payment", "charge", "charge_id"

    def body(self, task: str) -> dict[str, Any]:
        return {"order_id": task, "amount_cents": 100, "currency": "EUR", "card": "4242424242424242"}


class Shipping(DemoDriver):
    service, action, id_field = "shipping", "ship", "shipment_id"

    def body(self, task: str) -> dict[str, Any]:
        return {"order_id": task, "address": "1 Main St"}


class ExampleDriver(Driver):
    """An example's services (in memory, on loopback): rules scoped by the key's prefix, counted
    in ``hits`` under the key's lock; a hold runs out on its own (nothing lifts it)."""

    kinds: ClassVar[dict[str, Kind]] = EXAMPLE_KINDS
    action = ""
    scope = ""  # the rule's field that scopes it to keys starting so

    async def fault(self, task: str, kind: str, *, hold_s: float | None = None) -> str:
        rule: dict[str, Any] = {"endpoint": self.action, "kind": kind, self.scope: f"{task}:"}
        if hold_s is not None or kind == "latency":
            rule["latency_ms"] = int((hold_s if hold_s is not None else 0.05) * 1000)
        added = await self.http.post("/admin/faults", json=rule)
        added.raise_for_status()
        return str(added.json()["faults"] - 1)

    async def hits(self, rule: str) -> int:
        faults = (await self.http.get("/admin/faults")).raise_for_status().json()["faults"]
        return int(faults[int(rule)]["hits"])


class Flights(ExampleDriver):
    action, scope, id_field = "flights.book", "trip", "booking_id"
    forward_path, lookup_path = "/flights/book", "/flights/lookup"

    def body(self, task: str) -> dict[str, Any]:
        return {"trip": task, "traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01"}

    async def effects(self, task: str, key: str) -> list[str]:
        entries = (await self.http.get("/ledger", params={"trip": task})).raise_for_status().json()["entries"]
        return [e["booking_id"] for e in entries if e["key"] == key and e["action"] == self.action]


class Bank(ExampleDriver):
    action, scope, id_field = "payout_bank.pay", "run", "payment_id"
    forward_path, lookup_path = "/payees/emp-0001/payments", "/payments/lookup"

    def body(self, task: str) -> dict[str, Any]:
        return {"run_id": task, "currency": "EUR", "amount_cents": 1250}

    async def effects(self, task: str, key: str) -> list[str]:
        entries = (await self.http.get("/ledger", params={"run": task})).raise_for_status().json()["entries"]
        return [e["payment_id"] for e in entries if e["key"] == key and e["action"] == self.action]
