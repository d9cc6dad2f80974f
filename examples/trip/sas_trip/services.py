"""The trip's own services - an airline (which also issues tickets, for the ticketed trip, and
reserves seats on a booked flight, for the seated trip), a hotel and a card processor in one
small process - as
a team's services would meet sas's HTTP contract (docs/http-contract.md):

- every business call takes an ``Idempotency-Key`` and performs its effect at most once per
  key: a repeated key gets the stored answer;
- an undo that arrives before its forward call voids the key: a late forward is refused
  (``409 {"error": "voided"}``) and has no effect;
- a refusal is a 4xx with a JSON object ``{"error", "message"}``; ``GET /<service>/lookup``
  says what was done under a forward key, once a request being served under it has ended, and
  its "nothing" is final: it voids the key as an early undo does;
- ``GET /ledger?trip=T`` lists the effects, ``/admin/faults`` injects faults (for tests; ``DELETE`` clears them).

State lives in memory: this is an example, not a booking system. ``sas-trip-services --port 8090``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

# What each forward action books, and the undo that cancels it.
FORWARD = {
    "flights.book": "fl",
    "hotels.book": "ht",
    "cards.charge": "ch",
    "tickets.issue": "tk",
    "seats.reserve": "st",
}
UNDO = {
    "flights.cancel": "flights.book",
    "hotels.cancel": "hotels.book",
    "cards.refund": "cards.charge",
    "seats.release": "seats.reserve",
}
FARE_CENTS = 12_000
NIGHT_CENTS = 9_000


@dataclass
class Ledger:
    answers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # key -> stored answer
    effects: list[dict[str, Any]] = field(default_factory=list)
    voided: set[str] = field(default_factory=set)
    faults: list[dict[str, Any]] = field(default_factory=list)
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)


def refusal(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


def _refused(action: str, body: dict[str, Any]) -> JSONResponse | None:
    """The services' business rules: where they say no, for good."""
    if action == "flights.book" and body.get("destination") == "Atlantis":
        return refusal(422, "no_route", "no flight goes to Atlantis")
    if action == "hotels.book" and body.get("city") == "Nowhere":
        return refusal(422, "no_hotel", "there is no hotel in Nowhere")
    if action == "cards.charge" and body.get("card") == "4000000000000002":
        return refusal(402, "card_declined", "the card was declined")
    if action == "tickets.issue" and body.get("traveller") == "Mallory":
        return refusal(403, "no_fly", "the traveller may not be ticketed")
    if action == "seats.reserve" and body.get("seat") == "cockpit":
        return refusal(409, "no_seat", "no passenger sits in the cockpit")
    return None


def _answer(action: str, body: dict[str, Any], ledger: Ledger, key: str) -> dict[str, Any]:
    if action in FORWARD:
        answer: dict[str, Any] = {"booking_id": f"{FORWARD[action]}_{uuid.uuid4().hex[:12]}"}
        if action == "flights.book":
            answer["fare_cents"] = FARE_CENTS
        elif action == "hotels.book":
            answer["total_cents"] = NIGHT_CENTS * int(body.get("nights", 1))
        elif action == "tickets.issue":
            answer = {"ticket_id": answer["booking_id"]}
        elif action == "seats.reserve":
            answer["seat"] = body.get("seat")
        else:
            answer = {"charge_id": answer["booking_id"], "amount_cents": body.get("amount_cents")}
        return answer
    # An undo: of the effect it names, else of what was done under the forward key, if anything.
    forward_key = key.removesuffix(":undo")
    done = ledger.answers.get(forward_key)
    if done is None:
        ledger.voided.add(forward_key)  # a late forward under that key must not take effect
    return {"refunded": done is not None} if action == "cards.refund" else {"cancelled": done is not None}


def business(action: str, ledger: Ledger) -> Any:
    async def handle(request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not 1 <= len(key) <= 200:
            return refusal(400, "missing_idempotency_key", "the Idempotency-Key header is required")
        try:
            body = await request.json()
        except ValueError:
            return refusal(400, "invalid_json", "the body must be a JSON object")
        if not isinstance(body, dict):
            return refusal(400, "invalid_json", "the body must be a JSON object")
        # One request per key at a time: a retry that arrives while the first is still at work
        # waits for it, then gets its answer (no second effect).
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            return await _once(action, key, body, ledger)

    return handle


def _fault(action: str, key: str, ledger: Ledger) -> dict[str, Any] | None:
    """The first rule for this call that is not spent, counted: its ``hits`` show a request is
    held under its key (a test sends a lookup then). A spent one must not hide the next."""
    for fault in ledger.faults:
        spent = fault["kind"] != "latency" and fault["times"] <= 0
        if fault["endpoint"] == action and key.startswith(fault["trip"]) and not spent:
            fault["hits"] += 1
            return fault
    return None


async def _once(action: str, key: str, body: dict[str, Any], ledger: Ledger) -> Response:
    """One business request, alone under its key."""
    stored = ledger.answers.get(key)
    if stored is not None:
        return JSONResponse(stored[1], status_code=stored[0])  # replayed: no second effect
    fault = _fault(action, key, ledger)
    if fault is not None and fault.get("latency_ms"):
        await asyncio.sleep(fault["latency_ms"] / 1000)
    if fault is not None and fault["kind"] == "unavailable" and fault["times"] > 0:
        fault["times"] -= 1
        return refusal(503, "unavailable", "try again (injected fault)")
    if action in FORWARD and key in ledger.voided:
        return refusal(409, "voided", f"{action} under {key} was undone before it arrived")
    refused = _refused(action, body) if action in FORWARD else None
    if refused is not None:
        return refused  # refusals are not stored: a later call is judged afresh
    answer = _answer(action, body, ledger, key)
    ledger.answers[key] = (200, answer)
    ledger.effects.append({"action": action, "key": key, **answer})
    if fault is not None and fault["kind"] == "lost_response" and fault["times"] > 0:
        fault["times"] -= 1
        return refusal(500, "lost", "the effect is done, the answer lost (injected fault)")
    return JSONResponse(answer)


def lookup(service: str, ledger: Ledger) -> Any:
    forward = next(a for a in FORWARD if a.startswith(f"{service}."))
    field = "charge_id" if service == "cards" else "booking_id"

    async def handle(request: Request) -> Response:
        key = request.query_params.get("idempotency_key", "")
        if not 1 <= len(key) <= 200:
            return refusal(400, "invalid_request", "idempotency_key is required: 1 to 200 characters")
        # A booking still being served under the key is waited for (its lock), then answered
        # about. "Nothing done" voids the key: an undo sends nothing on that answer, so a
        # forward arriving later under it must never take effect.
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            found = ledger.answers.get(key)
            if found is None:
                ledger.voided.add(key)
        return JSONResponse({field: found[1].get(field) if found is not None else None, "action": forward})

    return handle


def create_app(ledger: Ledger | None = None) -> Starlette:
    """The services' app, over ``ledger`` (a fresh one unless a test passes its own to watch)."""
    ledger = ledger if ledger is not None else Ledger()

    async def show_ledger(request: Request) -> Response:
        trip = request.query_params.get("trip", "")
        return JSONResponse({"entries": [e for e in ledger.effects if e["key"].startswith(f"{trip}:")]})

    async def add_fault(request: Request) -> Response:
        rule = await request.json()
        ledger.faults.append({"times": 1, "trip": "", **rule, "hits": 0})
        return JSONResponse({"faults": len(ledger.faults)})

    async def list_faults(_: Request) -> Response:
        return JSONResponse({"faults": ledger.faults})

    async def clear_faults(request: Request) -> Response:
        """The rules of one trip (``?trip=T``), or every rule, gone: the service is back."""
        trip = request.query_params.get("trip")
        kept = [f for f in ledger.faults if trip is not None and f["trip"] != trip]
        cleared, ledger.faults[:] = len(ledger.faults) - len(kept), kept
        return JSONResponse({"cleared": cleared})

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True})

    routes = [Route(f"/{a.replace('.', '/')}", business(a, ledger), methods=["POST"]) for a in [*FORWARD, *UNDO]]
    routes += [
        Route(f"/{s}/lookup", lookup(s, ledger), methods=["GET"]) for s in ("flights", "hotels", "cards", "seats")
    ]
    routes += [
        Route("/ledger", show_ledger, methods=["GET"]),
        Route("/admin/faults", add_fault, methods=["POST"]),
        Route("/admin/faults", list_faults, methods=["GET"]),
        Route("/admin/faults", clear_faults, methods=["DELETE"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    args = parser.parse_args()
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
