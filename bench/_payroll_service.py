"""The payroll service of the fan-out's tests and bench (``python -m bench._payroll_service
--port P`` serves it alone), by the HTTP contract (docs/http-contract.md): a
payment under each idempotency key at most once, one request per key at a time, a refund of each
payment at most once, a lookup by the forward key (it waits for a payment being served under the
key, and its "nothing" voids the key: a payment arriving later under it is refused ``voided``),
and a ledger of every effect. A recipient whose id starts with ``refuse`` is refused for good
(422); ``slow`` ones are answered after a pause (a worker can die meanwhile); ``hang`` ones are
held at the service until ``Ledger.released`` is set, and paid then (a call that lands late,
whoever has given up on it). ``GET /payroll/ledger?prefix=`` says what it holds, for a bench in
another process."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Ledger:
    paid: dict[str, str] = field(default_factory=dict)  # idempotency key -> payment id
    to: dict[str, str] = field(default_factory=dict)  # payment id -> recipient
    refunded: dict[str, str] = field(default_factory=dict)  # payment id -> its refund's key
    entries: list[tuple[str, str]] = field(default_factory=list)  # (action, recipient), in order
    calls: int = 0
    slow_s: float = 0.0
    voided: set[str] = field(default_factory=set)  # forward keys a lookup found nothing under
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    holding: set[str] = field(default_factory=set)  # the ``hang`` recipients held at the service now
    lookups: list[str] = field(default_factory=list)  # the keys asked about, in the order asked
    released: asyncio.Event = field(default_factory=asyncio.Event)


def payroll_service(ledger: Ledger) -> Starlette:
    async def pay(request: Request) -> Response:
        ledger.calls += 1
        key = request.headers["Idempotency-Key"]
        body = await request.json()
        # One request per key at a time: a retry arriving while the first is still served waits
        # for it and gets its answer; a lookup waits for it too.
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            return await _pay_once(key, str(body["to"]))

    async def _pay_once(key: str, recipient: str) -> Response:
        if key in ledger.paid:
            return JSONResponse({"payment_id": ledger.paid[key]})
        if key in ledger.voided:
            return JSONResponse({"error": "voided", "message": f"{key} was looked up as nothing"}, status_code=409)
        if recipient.startswith("hang"):
            ledger.holding.add(recipient)
            try:
                await ledger.released.wait()
            finally:
                ledger.holding.discard(recipient)
        if recipient.startswith("slow") and ledger.slow_s:
            await asyncio.sleep(ledger.slow_s)
        if recipient.startswith("refuse"):
            return JSONResponse({"error": "refused", "message": f"{recipient} cannot be paid"}, status_code=422)
        payment = f"pay_{len(ledger.paid)}"
        ledger.paid[key] = payment
        ledger.to[payment] = recipient
        ledger.entries.append(("pay", recipient))
        return JSONResponse({"payment_id": payment})

    async def refund(request: Request) -> Response:
        key = request.headers["Idempotency-Key"]
        payment = str((await request.json())["payment_id"])
        if payment not in ledger.to:
            return JSONResponse({"error": "unknown", "message": f"no payment {payment}"}, status_code=404)
        if payment not in ledger.refunded:
            ledger.refunded[payment] = key
            ledger.entries.append(("refund", ledger.to[payment]))
        return JSONResponse({"refunded": True})

    async def lookup(request: Request) -> Response:
        key = request.query_params["idempotency_key"]
        ledger.lookups.append(key)
        # A payment still being served under the key is waited for, then answered about; "nothing"
        # voids the key, so a payment arriving after this answer never takes effect.
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            payment = ledger.paid.get(key)
            if payment is None:
                ledger.voided.add(key)
        return JSONResponse({"payment_id": payment})

    async def report(request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        return JSONResponse({"report_id": f"report-{body['run']}"})

    async def effects(request: Request) -> Response:
        """What the ledger holds for the recipients whose id starts with ``prefix``: how many
        were paid, how many of those payments refunded, and the most any one was paid (the bench
        reads it from its own process)."""
        prefix = request.query_params.get("prefix", "")
        mine = Counter(who for who in ledger.to.values() if who.startswith(prefix))
        refunded = [ledger.to[p] for p in ledger.refunded if ledger.to[p].startswith(prefix)]
        return JSONResponse(
            {"paid": mine.total(), "refunded": len(refunded), "most_paid_once": max(mine.values(), default=0)}
        )

    return Starlette(
        routes=[
            Route("/payroll/pay", pay, methods=["POST"]),
            Route("/payroll/refund", refund, methods=["POST"]),
            Route("/payroll/lookup", lookup, methods=["GET"]),
            Route("/payroll/report", report, methods=["POST"]),
            Route("/payroll/ledger", effects, methods=["GET"]),
        ]
    )


if __name__ == "__main__":
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(payroll_service(Ledger()), host="127.0.0.1", port=args.port, log_level="warning")
