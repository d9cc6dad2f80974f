"""What each business endpoint does to the ledger, inside one transaction.

Order of checks for a request with Idempotency-Key K:

1. K already succeeded: replay the stored answer (or refuse if the body differs).
2. Forward call and K was compensated, or looked up with nothing done (tombstone): refuse
   with ``voided``, no effect.
3. Business rules from the data (out of stock, card declined, an address shipping cannot
   deliver to): refuse, no effect.
4. Record the effect and the answer together.

Refusals are not stored, so a later call with the same key is evaluated afresh.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sas_demo_services.errors import ServiceError
from sas_demo_services.ledger import Effect, LedgerEntry, LedgerTx, StoredResponse
from sas_demo_services.schemas import ChargeBody, Endpoint, RequestBody, ReserveBody, ShipBody

OUT_OF_STOCK_SKU = "OUT-OF-STOCK"
DECLINED_CARD = "4000000000000002"
UNDELIVERABLE_ADDRESS = "0 Nowhere Road"


@dataclass(frozen=True)
class Outcome:
    """The answer to a business call.

    Attributes:
        status: HTTP status.
        body: The JSON text, byte for byte what the first successful call returned.
        replayed: Whether it came from the idempotency store.
    """

    status: int
    body: str
    replayed: bool = False


def fingerprint(endpoint: Endpoint, body: RequestBody) -> str:
    """A digest of what a request asks for, to tell a repeat from a key reused for something else."""
    canonical = json.dumps({"endpoint": endpoint.name, "body": body.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def perform(endpoint: Endpoint, key: str, body: RequestBody) -> Callable[[LedgerTx], Outcome]:
    """The transaction that carries out one business call.

    Args:
        endpoint: Which endpoint was called.
        key: The call's Idempotency-Key.
        body: The validated request body.

    Returns:
        A function for :meth:`sas_demo_services.ledger.Ledger.run`; it raises
        :class:`ServiceError` for a refusal, which rolls the transaction back.
    """
    digest = fingerprint(endpoint, body)

    def operation(tx: LedgerTx) -> Outcome:
        stored = tx.stored_response(key)
        if stored is not None:
            if stored.fingerprint != digest:
                raise ServiceError(
                    422,
                    "idempotency_key_reuse",
                    f"Idempotency-Key {key!r} was already used for a different {stored.endpoint} request",
                )
            return Outcome(stored.status, stored.body, replayed=True)
        result = _compensate(tx, endpoint, key, body) if endpoint.undoes else _forward(tx, endpoint, key, body)
        text = json.dumps(result, separators=(",", ":"))
        tx.store_response(key, StoredResponse(endpoint.name, digest, 200, text))
        return Outcome(200, text)

    return operation


def look_up(endpoint: Endpoint, key: str) -> Callable[[LedgerTx], LedgerEntry | None]:
    """The transaction of a lookup: the forward effect done under ``key``, or, when there is
    none, the key voided in the same transaction, so that "nothing was done" stays true: a
    forward request still on its way is refused (``voided``) when it arrives. An undo relies on
    that answer to send nothing (docs/http-contract.md)."""

    def operation(tx: LedgerTx) -> LedgerEntry | None:
        found = tx.forward_by_key(endpoint.service, endpoint.action, key)
        if found is None:
            tx.void(endpoint.service, key, by_key="lookup")
        return found

    return operation


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def _forward(tx: LedgerTx, endpoint: Endpoint, key: str, body: RequestBody) -> dict[str, Any]:
    if tx.is_voided(endpoint.service, key):
        raise ServiceError(
            409,
            "voided",
            f"{endpoint.name} with Idempotency-Key {key!r} was compensated before it arrived; it was not performed",
        )
    amount: int | None = None
    provider_id = _new_id(endpoint.id_prefix)
    result: dict[str, Any]
    if isinstance(body, ReserveBody):
        if body.sku == OUT_OF_STOCK_SKU:
            raise ServiceError(409, "out_of_stock", f"SKU {body.sku!r} is out of stock")
        result = {"order_id": body.order_id, "sku": body.sku, "quantity": body.quantity}
    elif isinstance(body, ChargeBody):
        if body.card == DECLINED_CARD:
            raise ServiceError(402, "card_declined", "the card was declined")
        amount = body.amount_cents
        # As a real provider's payment intent: a secret the payer's device would confirm with.
        result = {"amount_cents": amount, "client_secret": f"{provider_id}_secret_{uuid.uuid4().hex}"}
    elif isinstance(body, ShipBody):
        if body.address.strip().casefold() == UNDELIVERABLE_ADDRESS.casefold():
            raise ServiceError(422, "address_rejected", f"no delivery to {body.address!r}")
        result = {}
        if body.parcel is not None:
            provider_id = _new_id("prc")
            result = {"parcel": body.parcel}
    else:  # pragma: no cover - the endpoint catalogue pairs forward actions with these bodies
        raise TypeError(f"no forward action for {type(body).__name__}")
    tx.record_effect(
        Effect(endpoint.service, endpoint.action, body.order_id, key, amount_cents=amount, provider_id=provider_id)
    )
    return {endpoint.id_field: provider_id, **result}


def _compensate(tx: LedgerTx, endpoint: Endpoint, key: str, body: RequestBody) -> dict[str, Any]:
    """Undo the forward effect the body names, by the service's id of it, as real providers do.

    The id is required whenever there is something to undo: an undo without it, or with an id
    that is not the effect done under ``target_key``, is refused (422) and changes nothing.
    Without an id and with nothing done under ``target_key``, there is nothing to undo: the key
    is tombstoned all the same (a late forward request must not take effect), and the answer
    says nothing was undone."""
    assert endpoint.undoes is not None
    target = endpoint.target_key(body) or ""
    wanted = endpoint.target_id(body)
    named = tx.effect_by_id(endpoint.service, endpoint.undoes, wanted) if wanted is not None else None
    if wanted is not None and named is None:
        raise ServiceError(
            404, f"unknown_{endpoint.id_field}", f"{endpoint.service} has no {endpoint.undoes} with id {wanted!r}"
        )
    if named is not None and (named.order_id != body.order_id or (target and named.idempotency_key != target)):
        raise ServiceError(
            422,
            f"wrong_{endpoint.id_field}",
            f"{endpoint.id_field} {wanted!r} is not the {endpoint.undoes} of this order and key",
        )
    done: LedgerEntry | None = None
    if target:
        done = tx.effect_in_force(endpoint.service, endpoint.undoes, target)
        if done is not None and wanted is None:
            raise ServiceError(
                422,
                f"{endpoint.id_field}_required",
                f"{endpoint.name} must name the {endpoint.undoes} it undoes: {endpoint.id_field} is required",
            )
        # Tombstone even when nothing was done: the forward request may still be in
        # flight (a zombie) and must not take effect after its undo.
        tx.void(endpoint.service, target, by_key=key)
    elif named is not None:
        done = tx.effect_in_force(endpoint.service, endpoint.undoes, named.idempotency_key)
    undo_id: str | None = None
    if done is not None:
        undo_id = _new_id(_UNDO_PREFIX[endpoint.action])
        tx.record_effect(
            Effect(
                endpoint.service,
                endpoint.action,
                body.order_id,
                key,
                target_key=done.idempotency_key,
                amount_cents=done.amount_cents,
                provider_id=undo_id,
                target_id=done.provider_id,
            )
        )
    undone = done is not None
    if endpoint.action == "release":
        return {"released": undone}
    if endpoint.action == "refund":
        refunded = {"refunded": undone, "amount_cents": (done.amount_cents or 0) if done is not None else 0}
        return {**refunded, "refund_id": undo_id} if undo_id else refunded
    return {"cancelled": undone}


# The services' ids of the undo effects (a refund has its own id at a real provider too).
_UNDO_PREFIX = {"release": "rel", "refund": "re", "cancel": "cxl"}
