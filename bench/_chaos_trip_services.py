"""The chaos trip's services (bench/_chaos_trip.py): an airline, a hotel, a bank and an insurer
in one process, each meeting sas's HTTP contract (docs/http-contract.md), over a SQLite ledger
that survives ``kill -9`` (WAL, ``synchronous=FULL``; an effect and its stored answer commit in
one transaction), so the chaos run can count every effect at the end.

    python -m bench._chaos_trip_services --port P --ledger FILE [--fault-seed N --transient 0.2 ...]

- ``POST /<service>/<forward>`` performs the effect at most once per ``Idempotency-Key``; a
  repeated key gets the stored answer; a voided key is refused ``409 voided``.
- ``POST /<service>/<undo>`` undoes the effect its body names (by the service's id, which must
  be that of the effect done under ``forward_key``), and voids ``forward_key`` in the same
  transaction, whether or not anything was done under it.
- ``GET /<service>/lookup?idempotency_key=K`` answers the forward's stored answer, or, when
  nothing was done under K, nulls - and voids K in the same transaction (the contract's rule 1).
  It holds K's lock, so it never says "nothing" of a request still being served (rule 2).
- ``GET /ledger``: every effect and every void. ``GET /faults``: how often each fault fired.

Refusals for good, from the data: a flight to ``Atlantis`` (``no_route``), a hotel in
``Atlantis`` or ``Nowhere`` (``no_hotel``): a trip to Atlantis is refused by both siblings of
its parallel group at once. A trip to ``Limbo`` fails both siblings at once for a while: the
airline and the hotel each answer its first ``LIMBO_FAILS`` calls 503, more than a step's quick
retries, so both steps are Failed together and wait for the Supervisor. A flight to ``Nowhere`` is served slowly (``SLOW_S``, holding its
key's lock), so the hotel's refusal comes while the booking is still being served: its undo
is decided on a call in flight, and a lookup of its key waits for it. Faults (``--transient``, ``--hang``, ``--decline``) are exact per-call
rates drawn from ``--fault-seed``, on the forward endpoints, and on the undos too with
``--fault-scope all``; given on the command line, so a restart applies them again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sas_demo_services.locks import KeyLocks


@dataclass(frozen=True)
class Spec:
    """One service: its forward and undo paths, the ledger's names of both, its id field."""

    forward: str
    undo: str
    forward_action: str  # as the ledger names the effect (bench/_chaos_check.py reads it)
    undo_action: str
    id_field: str
    prefix: str


SERVICES = {
    "chaos_air": Spec("book", "cancel", "book_flight", "cancel_flight", "booking_id", "fl"),
    "chaos_hotel": Spec("book", "cancel", "book_hotel", "cancel_hotel", "booking_id", "ht"),
    "chaos_bank": Spec("charge", "refund", "charge", "refund", "charge_id", "ch"),
    "chaos_insurer": Spec("cover", "uncover", "cover", "uncover", "policy_id", "pol"),
}
FARE_CENTS, NIGHT_CENTS = 12_000, 9_000
SLOW_S = 2.0  # under the demo's complete-by (3 s): the slow booking succeeds, late
LIMBO_FAILS = 3  # the demo's quick retries (SAS_DEFAULT_STEP__MAX_ATTEMPTS) are 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, service TEXT NOT NULL, action TEXT NOT NULL,
    order_id TEXT NOT NULL, idempotency_key TEXT NOT NULL, target_key TEXT, provider_id TEXT
);
CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS voids (service TEXT NOT NULL, key TEXT NOT NULL, by_key TEXT NOT NULL,
    PRIMARY KEY (service, key));
"""


def refusal(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


class Ledger:
    """The effects, stored answers and voids, one SQLite transaction per operation."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)

    def answer(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT body FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def voided(self, service: str, key: str) -> bool:
        return (
            self.db.execute("SELECT 1 FROM voids WHERE service = ? AND key = ?", (service, key)).fetchone() is not None
        )

    def record(
        self,
        service: str,
        action: str,
        trip: str,
        key: str,
        answer: dict[str, Any],
        provider_id: str | None,
        target_key: str | None = None,
        void: str | None = None,
    ) -> None:
        """The effect (if ``provider_id``), its stored answer and the void, together or not at all."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            if provider_id is not None:
                self.db.execute(
                    "INSERT INTO ledger (service, action, order_id, idempotency_key, target_key, provider_id)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (service, action, trip, key, target_key, provider_id),
                )
            self.db.execute("INSERT INTO answers (key, body) VALUES (?, ?)", (key, json.dumps(answer)))
            if void is not None:
                self.void(service, void, key)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def void(self, service: str, key: str, by_key: str) -> None:
        self.db.execute("INSERT OR IGNORE INTO voids (service, key, by_key) VALUES (?, ?, ?)", (service, key, by_key))

    def entries(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT service, action, order_id, idempotency_key, target_key, provider_id FROM ledger ORDER BY seq"
        ).fetchall()
        names = ("service", "action", "order_id", "idempotency_key", "target_key", "provider_id")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def voids(self) -> list[dict[str, str]]:
        rows = self.db.execute("SELECT service, key, by_key FROM voids").fetchall()
        return [{"service": s, "key": k, "by_key": b} for s, k, b in rows]


class Faults:
    """Exact per-call rates: one die per call, its faces split between decline, hang, transient."""

    def __init__(
        self,
        seed: int,
        transient: float,
        hang: float,
        decline: float,
        hang_s: float,
        scope: str,
        declining: str = "chaos_bank",
    ) -> None:
        self.rng = random.Random(seed)
        self.transient, self.hang, self.decline, self.hang_s, self.scope = transient, hang, decline, hang_s, scope
        self.declining = declining  # the one service whose forward calls are declined
        self.hits: Counter[str] = Counter()

    def pick(self, service: str, undo: bool) -> str | None:
        if undo and self.scope != "all":
            return None
        roll = self.rng.random()
        decline = self.decline if (service == self.declining and not undo) else 0.0
        for kind, rate in (("decline", decline), ("hang", self.hang), ("transient", self.transient)):
            if roll < rate:
                self.hits[kind] += 1
                return kind
            roll -= rate
        return None


async def _stall(request: Request, seconds: float) -> None:
    """Hang ``seconds``, or less if the client hangs up first (the body is read: the next
    message is the disconnect)."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    try:
        await asyncio.wait_for(gone(), timeout=seconds)
    except TimeoutError:
        pass


def _refused(service: str, body: dict[str, Any]) -> JSONResponse | None:
    destination = body.get("destination")
    if service == "chaos_air" and destination == "Atlantis":
        return refusal(422, "no_route", "no flight goes to Atlantis")
    if service == "chaos_hotel" and destination in ("Atlantis", "Nowhere"):
        return refusal(422, "no_hotel", f"there is no hotel in {destination}")
    return None


def _forward_answer(service: str, spec: Spec, body: dict[str, Any]) -> dict[str, Any]:
    provider_id = f"{spec.prefix}_{uuid.uuid4().hex[:16]}"
    if service == "chaos_air":
        return {"booking_id": provider_id, "cost_cents": FARE_CENTS}
    if service == "chaos_hotel":
        return {"booking_id": provider_id, "cost_cents": NIGHT_CENTS * int(body["nights"])}
    if service == "chaos_bank":
        return {"charge_id": provider_id, "amount_cents": int(body["flight_cents"]) + int(body["hotel_cents"])}
    return {"policy_id": provider_id}


async def _request(request: Request, owner: str) -> tuple[str, dict[str, Any]] | JSONResponse:
    key = request.headers.get("Idempotency-Key", "")
    if not 1 <= len(key) <= 200 or not key.isprintable():
        return refusal(400, "missing_idempotency_key", "the Idempotency-Key header is required")
    try:
        body = await request.json()
    except ValueError:
        return refusal(400, "invalid_json", "the body must be a JSON object")
    if not isinstance(body, dict) or not isinstance(body.get(owner), str):
        return refusal(422, "invalid_request", f"the body must be a JSON object with a {owner}")
    return key, body


async def _fault(faults: Faults, service: str, undo: bool, request: Request) -> JSONResponse | None:
    kind = faults.pick(service, undo)
    if kind == "decline":
        return refusal(402, "card_declined", "the card was declined (injected fault)")
    if kind == "hang":
        await _stall(request, faults.hang_s)
        return refusal(504, "timeout", "gave up after hanging (injected fault)")
    if kind == "transient":
        return refusal(503, "unavailable", "try again (injected fault)")
    return None


class TripRules:
    """What the trip's services decide from the data: the refusals, the answers, the slow
    flight and Limbo's failures. Another set of services in the same shape (the chaos run's
    fan-out and child task: bench/_chaos_shape_services.py) gives its own."""

    owner = "trip"  # the body field naming the task, the ledger's order_id

    def __init__(self) -> None:
        self.limbo_calls: Counter[str] = Counter()  # in memory: a restart fails a Limbo key's calls again

    def before(self, service: str, key: str, body: dict[str, Any]) -> JSONResponse | None:
        """An answer given before the faults and the key's lock, or None."""
        if service in ("chaos_air", "chaos_hotel") and body.get("destination") == "Limbo":
            self.limbo_calls[key] += 1
            if self.limbo_calls[key] <= LIMBO_FAILS:
                return refusal(503, "unavailable", "both siblings fail for now (Limbo)")
        return None

    def slow_s(self, service: str, body: dict[str, Any]) -> float:
        """How long the call is served, holding its key's lock, before it is judged."""
        return SLOW_S if service == "chaos_air" and body.get("destination") == "Nowhere" else 0.0

    def refused(self, service: str, body: dict[str, Any]) -> JSONResponse | None:
        return _refused(service, body)

    def answer(self, service: str, spec: Spec, body: dict[str, Any]) -> dict[str, Any]:
        return _forward_answer(service, spec, body)


def create_app(ledger: Ledger, faults: Faults, services: dict[str, Spec] | None = None, rules: Any = None) -> Starlette:
    """The services' routes over one ledger: ``services`` and ``rules`` default to the trip's."""
    locks = KeyLocks()
    services = SERVICES if services is None else services
    rules = TripRules() if rules is None else rules
    owner = rules.owner

    def forward(service: str, spec: Spec) -> Any:
        async def handle(request: Request) -> Response:
            parsed = await _request(request, owner)
            if isinstance(parsed, JSONResponse):
                return parsed
            key, body = parsed
            early = rules.before(service, key, body)
            if early is not None:
                return early
            fault = await _fault(faults, service, False, request)
            if fault is not None:
                return fault
            async with locks.hold(key):
                slow = rules.slow_s(service, body)
                if slow:
                    await asyncio.sleep(slow)  # being served: a lookup of the key waits
                stored = ledger.answer(key)
                if stored is not None:
                    return JSONResponse(stored)  # a repeat: no second effect
                if ledger.voided(service, key):
                    return refusal(409, "voided", f"{key} was undone before it arrived")
                refused = rules.refused(service, body)
                if refused is not None:
                    return refused  # not stored: a later call is judged afresh
                answer = rules.answer(service, spec, body)
                ledger.record(service, spec.forward_action, body[owner], key, answer, answer[spec.id_field])
            return JSONResponse(answer)

        return handle

    def undo(service: str, spec: Spec) -> Any:
        async def handle(request: Request) -> Response:
            parsed = await _request(request, owner)
            if isinstance(parsed, JSONResponse):
                return parsed
            key, body = parsed
            target = body.get("forward_key")
            if not isinstance(target, str) or not 1 <= len(target) <= 200:
                return refusal(422, "invalid_request", "forward_key names the forward call's key")
            fault = await _fault(faults, service, True, request)
            if fault is not None:
                return fault
            async with locks.hold(key, target):
                stored = ledger.answer(key)
                if stored is not None:
                    return JSONResponse(stored)
                done = ledger.answer(target)
                wanted = body.get(spec.id_field)
                if done is not None and wanted != done[spec.id_field]:
                    return refusal(422, f"wrong_{spec.id_field}", f"{wanted!r} is not the effect done under {target}")
                if done is None and wanted is not None:
                    return refusal(404, f"unknown_{spec.id_field}", f"nothing was done under {target}")
                undo_id = f"un_{uuid.uuid4().hex[:16]}" if done is not None else None
                answer = {"undone": done is not None}
                ledger.record(service, spec.undo_action, body[owner], key, answer, undo_id, target, void=target)
            return JSONResponse(answer)

        return handle

    def lookup(service: str, spec: Spec) -> Any:
        async def handle(request: Request) -> Response:
            key = request.query_params.get("idempotency_key", "")
            if not 1 <= len(key) <= 200:
                return refusal(400, "invalid_request", "idempotency_key is required: 1 to 200 characters")
            async with locks.hold(key):
                found = ledger.answer(key)
                if found is None:
                    ledger.void(service, key, "lookup")  # "nothing" is final (autocommit)
            return JSONResponse(found if found is not None else {spec.id_field: None})

        return handle

    async def show_ledger(_: Request) -> Response:
        return JSONResponse({"entries": ledger.entries(), "voids": ledger.voids()})

    async def show_faults(_: Request) -> Response:
        return JSONResponse({"hits": dict(faults.hits)})

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True})

    routes = [Route("/ledger", show_ledger), Route("/faults", show_faults), Route("/healthz", healthz)]
    for service, spec in services.items():
        routes += [
            Route(f"/{service}/{spec.forward}", forward(service, spec), methods=["POST"]),
            Route(f"/{service}/{spec.undo}", undo(service, spec), methods=["POST"]),
            Route(f"/{service}/lookup", lookup(service, spec), methods=["GET"]),
        ]
    return Starlette(routes=routes)


def main(
    description: str = __doc__.splitlines()[0],
    services: dict[str, Spec] | None = None,
    rules: Any = None,
    declining: str = "chaos_bank",
) -> None:
    """Serve ``services`` (default: the trip's) with the faults of the command line; the
    declines fall on ``declining``'s forward calls."""
    import uvicorn

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ledger", required=True, help="SQLite file (created if missing)")
    p.add_argument("--fault-seed", type=int, default=0)
    p.add_argument("--transient", type=float, default=0.0, help="share of calls answered 503")
    p.add_argument("--hang", type=float, default=0.0, help="share of calls that hang --hang-s, then 504")
    p.add_argument("--hang-s", type=float, default=60.0)
    p.add_argument("--decline", type=float, default=0.0, help="share of charges declined for good (402)")
    p.add_argument("--fault-scope", choices=("all", "forward"), default="all")
    args = p.parse_args()
    if (
        not all(0 <= r <= 1 for r in (args.transient, args.hang, args.decline))
        or args.transient + args.hang + args.decline > 1
    ):
        p.error("--transient, --hang and --decline are shares of calls: each 0..1, together at most 1")
    faults = Faults(args.fault_seed, args.transient, args.hang, args.decline, args.hang_s, args.fault_scope, declining)
    app = create_app(Ledger(args.ledger), faults, services, rules)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
