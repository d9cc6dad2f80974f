"""The payout's own services - the runs desk, the bank and the notices desk, in one small
process - as a team's services would meet sas's HTTP contract (docs/http-contract.md), over REST
paths that carry the ids:

- ``PUT /runs/{run_id}`` validates a run (``DELETE /runs/{run_id}`` closes it); ``POST
  /payees/{payee_id}/payments`` pays one payee (``DELETE /payments/{payment_id}`` reverses it);
  ``POST /runs/{run_id}/notices`` tells each payee paid in the run (``DELETE
  /notices/{notice_id}`` withdraws the notices);
- every business call takes an ``Idempotency-Key`` and has its effect at most once per key: a
  repeated key gets the stored answer; an undo names the effect by the id the forward call
  answered, and is refused when that id is unknown (404) or was made under another key (422);
- a refusal is a 4xx ``{"error", "message"}``: a currency the bank does not pay in, a run over
  its limit, a payee whose id starts ``blocked-``, notices by a channel not offered;
- ``GET /runs/lookup``, ``/payments/lookup`` and ``/notices/lookup`` say what was done under a
  forward key, once a request being served under it has ended, and their "nothing" is final: it
  voids the key, so a forward call arriving later under it is refused ``409 voided``;
- ``GET /ledger?run=R`` lists the effects of run ``R`` (its child's notices too) and every
  request that reached the services for it (``calls``: lookups and refusals too), and
  ``/admin/faults`` injects faults (for tests).

State lives in memory: this is an example, not a bank. ``sas-payout-services --port 8091``.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

CURRENCIES = frozenset({"EUR", "GBP", "USD", "CHF"})
CHANNELS = frozenset({"email", "sms", "letter"})
RUN_LIMIT_CENTS = 1_000_000_00  # one million a run


@dataclass
class Ledger:
    answers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # key -> stored answer
    made: dict[str, str] = field(default_factory=dict)  # the services' id of an effect -> its key
    undone: set[str] = field(default_factory=set)  # the ids of effects undone
    effects: list[dict[str, Any]] = field(default_factory=list)
    # Every request that reached the services, refused or not: what was asked, not only what was done.
    calls: list[dict[str, str]] = field(default_factory=list)
    voided: set[str] = field(default_factory=set)
    faults: list[dict[str, Any]] = field(default_factory=list)
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)


class Refused(Exception):
    """A business rule said no, for good: answered as a 4xx ``{"error", "message"}``."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


def refusal(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


# Each action's work, given the ledger, the call's key, its path parameters and its body: its
# answer, and what the ledger's entry adds to it. Run alone under the call's key.
Done = tuple[dict[str, Any], dict[str, Any]]
Work = Callable[[Ledger, str, dict[str, str], dict[str, Any]], Done]


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def validate(ledger: Ledger, key: str, params: dict[str, str], body: dict[str, Any]) -> Done:
    currency, recipients = body.get("currency"), body.get("recipients")
    if currency not in CURRENCIES:
        raise Refused(422, "unsupported_currency", f"the bank pays in {', '.join(sorted(CURRENCIES))}, not {currency}")
    if not isinstance(recipients, list) or not recipients:
        raise Refused(422, "no_recipients", "a run pays one recipient or more")
    total = sum(int(r.get("amount_cents", 0)) for r in recipients)
    if total > RUN_LIMIT_CENTS:
        raise Refused(422, "over_limit", f"a run pays at most {RUN_LIMIT_CENTS // 100} {currency}")
    run_id = params["run_id"]
    ledger.made[run_id] = key
    return {"run_id": run_id, "recipients": len(recipients), "total_cents": total}, {}


def pay(ledger: Ledger, key: str, params: dict[str, str], body: dict[str, Any]) -> Done:
    payee = params["payee_id"]
    if payee.startswith("blocked-"):
        raise Refused(422, "payee_blocked", f"payee {payee} is blocked: nothing can be paid to them")
    payment_id = _new_id("pm")
    ledger.made[payment_id] = key
    answer = {"payment_id": payment_id, "amount_cents": int(body.get("amount_cents", 0))}
    return answer, {"payee_id": payee, "run_id": body.get("run_id"), "currency": body.get("currency")}


def send(ledger: Ledger, key: str, params: dict[str, str], body: dict[str, Any]) -> Done:
    run_id, channel = params["run_id"], body.get("channel")
    if channel not in CHANNELS:
        raise Refused(422, "unsupported_channel", f"notices go by {', '.join(sorted(CHANNELS))}, not {channel}")
    if run_id not in ledger.made:
        raise Refused(404, "unknown_run", f"no run {run_id} was validated")
    paid = [
        e
        for e in ledger.effects
        if e["action"] == "payout_bank.pay" and e.get("run_id") == run_id and e["payment_id"] not in ledger.undone
    ]
    notice_id = _new_id("nt")
    ledger.made[notice_id] = key
    return {"notice_id": notice_id, "sent": len(paid)}, {"run_id": run_id, "channel": channel}


def undo(id_param: str, field_name: str) -> Work:
    """The undo of the effect whose id is in the path: what it names must be what was done under
    its forward key (the undo's key less ``:undo``), as a provider undoes by its own id only."""

    def work(ledger: Ledger, key: str, params: dict[str, str], body: dict[str, Any]) -> Done:
        effect = params[id_param]
        made_under = ledger.made.get(effect)
        if made_under is None:
            raise Refused(404, "unknown", f"nothing was done as {effect}")
        if made_under != key.removesuffix(":undo"):
            raise Refused(422, "another_effect", f"{effect} was not done under this undo's forward key")
        ledger.undone.add(effect)
        done = next(e for e in ledger.effects if e["key"] == made_under)
        # The payee of a reversed payment, so that the ledger nets each payee's entries.
        return {field_name: True}, {id_param: effect, **{k: done[k] for k in ("payee_id", "run_id") if k in done}}

    return work


# Action (the Agent's activity name) -> its work; the forward ones are those a lookup can void.
FORWARD: dict[str, Work] = {"payout_runs.validate": validate, "payout_bank.pay": pay, "payout_notices.send": send}
UNDO: dict[str, Work] = {
    "payout_runs.close": undo("run_id", "closed"),
    "payout_bank.reverse": undo("payment_id", "reversed"),
    "payout_notices.withdraw": undo("notice_id", "withdrawn"),
}


def business(action: str, ledger: Ledger) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not 1 <= len(key) <= 200:
            return refusal(400, "missing_idempotency_key", "the Idempotency-Key header is required")
        ledger.calls.append({"action": action, "key": key})
        body: Any = {}
        if request.method in ("PUT", "POST"):
            try:
                body = await request.json()
            except ValueError:
                return refusal(400, "invalid_json", "the body must be a JSON object")
            if not isinstance(body, dict):
                return refusal(400, "invalid_json", "the body must be a JSON object")
        # One request per key at a time: a retry that arrives while the first is still at work
        # waits for it, then gets its answer (no second effect).
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            return await _once(action, key, dict(request.path_params), body, ledger)

    return handle


def _fault(action: str, key: str, ledger: Ledger) -> dict[str, Any] | None:
    """The first rule for this call that is not spent, counted: its ``hits`` show a request is
    held under its key (a test sends a lookup then). A spent one must not hide the next."""
    for fault in ledger.faults:
        spent = fault["kind"] != "latency" and fault["times"] <= 0
        if fault["endpoint"] == action and key.startswith(fault["run"]) and not spent:
            fault["hits"] += 1
            return fault
    return None


async def _once(action: str, key: str, params: dict[str, str], body: dict[str, Any], ledger: Ledger) -> Response:
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
    try:
        answer, noted = (FORWARD.get(action) or UNDO[action])(ledger, key, params, body)
    except Refused as no:
        return refusal(no.status, no.error, no.message)  # refusals are not stored: a later call is judged afresh
    ledger.answers[key] = (200, answer)
    ledger.effects.append({"action": action, "key": key, **noted, **answer})
    if fault is not None and fault["kind"] == "lost_response" and fault["times"] > 0:
        fault["times"] -= 1
        return refusal(500, "lost", "the effect is done, the answer lost (injected fault)")
    return JSONResponse(answer)


def lookup(forward: str, nothing: dict[str, None], ledger: Ledger) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        key = request.query_params.get("idempotency_key", "")
        if not 1 <= len(key) <= 200:
            return refusal(400, "invalid_request", "idempotency_key is required: 1 to 200 characters")
        ledger.calls.append({"action": f"{forward.partition('.')[0]}.lookup", "key": key})
        # A request still being served under the key is waited for (its lock), then answered
        # about. "Nothing done" voids the key: an undo sends nothing on that answer, so a
        # forward arriving later under it must never take effect.
        async with ledger.locks.setdefault(key, asyncio.Lock()):
            found = ledger.answers.get(key)
            if found is None:
                ledger.voided.add(key)
        return JSONResponse({**(found[1] if found is not None else nothing), "action": forward})

    return handle


def create_app(ledger: Ledger | None = None) -> Starlette:
    """The services' app, over ``ledger`` (a fresh one unless a test passes its own to watch)."""
    ledger = ledger if ledger is not None else Ledger()

    async def show_ledger(request: Request) -> Response:
        prefix = f"{request.query_params.get('run', '')}:"
        return JSONResponse(
            {
                "entries": [e for e in ledger.effects if e["key"].startswith(prefix)],
                "calls": [c for c in ledger.calls if c["key"].startswith(prefix)],
            }
        )

    async def add_fault(request: Request) -> Response:
        rule = await request.json()
        ledger.faults.append({"times": 1, "run": "", **rule, "hits": 0})
        return JSONResponse({"faults": len(ledger.faults)})

    async def list_faults(_: Request) -> Response:
        return JSONResponse({"faults": ledger.faults})

    async def healthz(_: Request) -> Response:
        return JSONResponse({"ok": True})

    # The lookups first: /runs/lookup is not a run's id.
    lookups = {
        "/runs/lookup": ("payout_runs.validate", {"run_id": None}),
        "/payments/lookup": ("payout_bank.pay", {"payment_id": None}),
        "/notices/lookup": ("payout_notices.send", {"notice_id": None}),
    }
    routes = [
        Route(path, lookup(forward, nothing, ledger), methods=["GET"]) for path, (forward, nothing) in lookups.items()
    ]
    rest = {
        "payout_runs.validate": ("PUT", "/runs/{run_id}"),
        "payout_runs.close": ("DELETE", "/runs/{run_id}"),
        "payout_bank.pay": ("POST", "/payees/{payee_id}/payments"),
        "payout_bank.reverse": ("DELETE", "/payments/{payment_id}"),
        "payout_notices.send": ("POST", "/runs/{run_id}/notices"),
        "payout_notices.withdraw": ("DELETE", "/notices/{notice_id}"),
    }
    routes += [Route(path, business(action, ledger), methods=[method]) for action, (method, path) in rest.items()]
    routes += [
        Route("/ledger", show_ledger, methods=["GET"]),
        Route("/admin/faults", add_fault, methods=["POST"]),
        Route("/admin/faults", list_faults, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
    return Starlette(routes=routes)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8091)
    args = parser.parse_args()
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
