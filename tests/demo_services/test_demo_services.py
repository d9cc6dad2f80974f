"""The remote services as the Agents meet them: a real process on loopback, real HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from sas_demo_services import (
    DECLINED_CARD,
    OUT_OF_STOCK_SKU,
    LedgerEntry,
    RemoteServicesAdmin,
    RemoteServicesError,
    ServiceProcess,
    ServiceStartError,
    free_port,
    probe_health,
    read_ledger,
    start_service_process,
)
from tests.helpers import wait_until as eventually

ROOT = Path(__file__).resolve().parents[2]


def order_id() -> str:
    return f"order-{uuid.uuid4().hex}"


def new_key() -> str:
    return f"key-{uuid.uuid4().hex}"


def reserve_body(order: str, **over: Any) -> dict[str, Any]:
    return {"order_id": order, "sku": "SKU-1", "quantity": 2, **over}


def charge_body(order: str, **over: Any) -> dict[str, Any]:
    return {"order_id": order, "amount_cents": 1999, "currency": "EUR", "card": "4242424242424242", **over}


def ship_body(order: str, **over: Any) -> dict[str, Any]:
    return {"order_id": order, "address": "1 Main St", **over}


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def process_gone(pid: int) -> bool:
    """True once ``pid`` is dead; an unreaped zombie counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


# --- fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    folder = tmp_path_factory.mktemp("remote_services")
    process = start_service_process(
        free_port(), str(folder / "ledger.db"), enable_faults=True, log_path=str(folder / "services.log")
    )
    with process:
        yield process


@pytest_asyncio.fixture
async def http(service: ServiceProcess) -> AsyncIterator[httpx.AsyncClient]:
    # Some tests post fault rules straight to /admin: they carry the admin token.
    async with httpx.AsyncClient(base_url=service.url, headers=service.admin_headers, timeout=10.0) as client:
        yield client


@pytest_asyncio.fixture
async def admin(service: ServiceProcess) -> AsyncIterator[RemoteServicesAdmin]:
    async with RemoteServicesAdmin(service.url, admin_token=service.admin_token) as helper:
        yield helper
        # Rules are process-wide; never let one leak into the next test.
        await helper.clear_faults()


async def post(http: httpx.AsyncClient, path: str, body: Any, key: str | None, **kwargs: Any) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return await http.post(path, json=body, headers=headers, **kwargs)


def rows(entries: list[LedgerEntry]) -> list[tuple[str, str]]:
    return [(entry.service, entry.action) for entry in entries]


# --- basics -----------------------------------------------------------------------


async def test_healthz(http: httpx.AsyncClient) -> None:
    response = await http.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


async def test_reserve_records_one_row(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    response = await post(http, "/inventory/reserve", reserve_body(order), key)
    assert response.status_code == 200
    body = response.json()
    assert body["reservation_id"]
    assert body | {"reservation_id": None} == {"reservation_id": None, "order_id": order, "sku": "SKU-1", "quantity": 2}
    assert "idempotent-replayed" not in response.headers
    (entry,) = await admin.ledger(order)
    assert (entry.service, entry.action, entry.order_id, entry.idempotency_key) == ("inventory", "reserve", order, key)
    assert entry.target_key is None and entry.amount_cents is None


async def test_charge_records_amount(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    response = await post(http, "/payment/charge", charge_body(order), key)
    assert response.status_code == 200
    assert response.json()["amount_cents"] == 1999 and response.json()["charge_id"]
    (entry,) = await admin.ledger(order)
    assert (entry.service, entry.action, entry.amount_cents, entry.idempotency_key) == ("payment", "charge", 1999, key)


async def test_ship_records_one_row(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    response = await post(http, "/shipping/ship", ship_body(order), key)
    assert response.status_code == 200 and response.json()["shipment_id"]
    assert rows(await admin.ledger(order)) == [("shipping", "ship")]


@pytest.mark.parametrize(
    ("forward", "make_body", "undo", "target_field", "id_field", "answer"),
    [
        ("/inventory/reserve", reserve_body, "/inventory/release", "reserve_key", "reservation_id", {"released": True}),
        (
            "/payment/charge",
            charge_body,
            "/payment/refund",
            "charge_key",
            "charge_id",
            {"refunded": True, "amount_cents": 1999},
        ),
        ("/shipping/ship", ship_body, "/shipping/cancel", "ship_key", "shipment_id", {"cancelled": True}),
    ],
)
async def test_compensation_undoes_the_forward_effect(
    http: httpx.AsyncClient,
    admin: RemoteServicesAdmin,
    forward: str,
    make_body: Callable[[str], dict[str, Any]],
    undo: str,
    target_field: str,
    id_field: str,
    answer: dict[str, Any],
) -> None:
    order, key, undo_key = order_id(), new_key(), new_key()
    done = await post(http, forward, make_body(order), key)
    assert done.status_code == 200
    provider_id = done.json()[id_field]
    undo_body = {"order_id": order, target_field: key, id_field: provider_id}
    response = await post(http, undo, undo_body, undo_key)
    # The undo has an id of its own (a refund's re_…); the rest is the answer.
    assert response.status_code == 200 and response.json() | answer == response.json()
    forward_row, undo_row = await admin.ledger(order)
    assert undo_row.action == undo.rsplit("/", 1)[1]
    assert (undo_row.idempotency_key, undo_row.target_key) == (undo_key, key)
    assert (forward_row.provider_id, undo_row.target_id) == (provider_id, provider_id)
    assert undo_row.amount_cents == forward_row.amount_cents
    assert undo_row.seq > forward_row.seq

    # Repeat: replayed, no new row. Another key for the same undo: nothing left to undo.
    replay = await post(http, undo, undo_body, undo_key)
    assert replay.json() == response.json() and replay.headers["idempotent-replayed"] == "true"
    again = await post(http, undo, undo_body, new_key())
    assert again.status_code == 200 and not next(iter(again.json().values()))
    assert len(await admin.ledger(order)) == 2


# --- idempotency ------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "", "x" * 201, "tab\tkey"])
async def test_missing_or_invalid_idempotency_key(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin, key: str | None
) -> None:
    order = order_id()
    response = await post(http, "/payment/charge", charge_body(order), key)
    assert response.status_code == 400
    assert response.json()["error"] == "missing_idempotency_key" and response.json()["message"]
    assert await admin.ledger(order) == []


async def test_replay_returns_same_body_and_no_second_row(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    first = await post(http, "/payment/charge", charge_body(order), key)
    second = await post(http, "/payment/charge", charge_body(order), key)
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second.headers["idempotent-replayed"] == "true"
    assert len(await admin.ledger(order)) == 1


async def test_concurrent_duplicates_take_effect_once(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    responses = await asyncio.gather(*(post(http, "/payment/charge", charge_body(order), key) for _ in range(8)))
    assert {r.status_code for r in responses} == {200}
    assert len({r.content for r in responses}) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 7
    assert len(await admin.ledger(order)) == 1


async def test_key_reuse_with_different_body(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    assert (await post(http, "/payment/charge", charge_body(order), key)).status_code == 200
    changed = await post(http, "/payment/charge", charge_body(order, amount_cents=1), key)
    assert changed.status_code == 422 and changed.json()["error"] == "idempotency_key_reuse"
    elsewhere = await post(http, "/shipping/ship", ship_body(order), key)
    assert elsewhere.status_code == 422 and elsewhere.json()["error"] == "idempotency_key_reuse"
    assert rows(await admin.ledger(order)) == [("payment", "charge")]


async def test_ledger_filters(http: httpx.AsyncClient, admin: RemoteServicesAdmin, service: ServiceProcess) -> None:
    order, first, second = order_id(), new_key(), new_key()
    await post(http, "/inventory/reserve", reserve_body(order), first)
    await post(http, "/payment/charge", charge_body(order), second)
    assert [e.idempotency_key for e in await admin.ledger(order, idempotency_key=second)] == [second]
    everything = await admin.ledger()
    assert {first, second} <= {e.idempotency_key for e in everything}
    assert [e.seq for e in everything] == sorted(e.seq for e in everything)
    # Another process can read the file directly and sees the same thing.
    assert read_ledger(service.ledger_path, order_id=order) == await admin.ledger(order)


# --- validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/inventory/reserve", {"order_id": "o", "sku": "S", "quantity": -1}),
        ("/inventory/reserve", {"order_id": "o", "sku": "S", "quantity": 0}),
        ("/inventory/reserve", {"order_id": "o", "sku": "S", "quantity": "2"}),
        ("/inventory/reserve", {"order_id": "o", "sku": "S"}),
        ("/payment/charge", {"order_id": "o", "amount_cents": 0, "currency": "EUR", "card": "4242"}),
        ("/payment/charge", {"order_id": "o", "amount_cents": 5, "currency": "EURO", "card": "4242"}),
        ("/payment/charge", {"order_id": 7, "amount_cents": 5, "currency": "EUR", "card": "4242"}),
        ("/payment/refund", {"order_id": "o"}),
        ("/shipping/ship", {"order_id": "o", "address": ""}),
        ("/shipping/cancel", {"order_id": "o", "ship_key": None}),
        ("/shipping/ship", ["not", "an", "object"]),
    ],
)
async def test_invalid_body(http: httpx.AsyncClient, path: str, body: Any) -> None:
    response = await post(http, path, body, new_key())
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request" and response.json()["message"]


async def test_malformed_json_and_retry_with_same_key(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    response = await http.post(
        "/shipping/ship", content=b'{"order_id": ', headers={"Idempotency-Key": key, "Content-Type": "application/json"}
    )
    assert response.status_code == 422 and response.json()["error"] == "invalid_request"
    # A refusal is not remembered: the same key then works.
    assert (await post(http, "/shipping/ship", ship_body(order), key)).status_code == 200
    assert len(await admin.ledger(order)) == 1


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_wrong_content_type(http: httpx.AsyncClient, content_type: str | None) -> None:
    headers = {"Idempotency-Key": new_key()}
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await http.post("/shipping/ship", content=b'{"order_id": "o", "address": "a"}', headers=headers)
    assert response.status_code == 415 and response.json()["error"] == "unsupported_media_type"


async def test_unknown_route_and_method_answer_json(http: httpx.AsyncClient) -> None:
    missing = await http.get("/nowhere")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    wrong = await http.get("/payment/charge")
    assert wrong.status_code == 405 and wrong.json()["error"] == "method_not_allowed"


# --- business refusals ------------------------------------------------------------


async def test_card_declined(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    for _ in range(2):  # not stored: evaluated again, with the same answer
        response = await post(http, "/payment/charge", charge_body(order, card=DECLINED_CARD), key)
        assert response.status_code == 402 and response.json()["error"] == "card_declined"
        assert "idempotent-replayed" not in response.headers
    assert await admin.ledger(order) == []


async def test_out_of_stock(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    response = await post(http, "/inventory/reserve", reserve_body(order, sku=OUT_OF_STOCK_SKU), new_key())
    assert response.status_code == 409 and response.json()["error"] == "out_of_stock"
    assert await admin.ledger(order) == []


# --- compensation guard -----------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "target_field", "answer"),
    [
        ("/inventory/release", "reserve_key", {"released": False}),
        ("/payment/refund", "charge_key", {"refunded": False, "amount_cents": 0}),
        ("/shipping/cancel", "ship_key", {"cancelled": False}),
    ],
)
async def test_compensation_with_nothing_done(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin, path: str, target_field: str, answer: dict[str, Any]
) -> None:
    order = order_id()
    response = await post(http, path, {"order_id": order, target_field: new_key()}, new_key())
    assert response.status_code == 200 and response.json() == answer
    assert await admin.ledger(order) == []


async def test_compensation_with_empty_target_is_a_no_op(http: httpx.AsyncClient) -> None:
    response = await post(http, "/payment/refund", {"order_id": order_id(), "charge_key": ""}, new_key())
    assert response.status_code == 200 and response.json() == {"refunded": False, "amount_cents": 0}


async def test_late_forward_after_compensation_is_voided(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    refund = await post(http, "/payment/refund", {"order_id": order, "charge_key": key}, new_key())
    assert refund.json() == {"refunded": False, "amount_cents": 0}
    zombie = await post(http, "/payment/charge", charge_body(order), key)
    assert zombie.status_code == 409
    assert zombie.json()["error"] == "voided" and "compensated" in zombie.json()["message"]
    assert await admin.ledger(order) == []
    # The tombstone is per service: the same key elsewhere is unaffected.
    assert (await post(http, "/shipping/ship", ship_body(order), new_key())).status_code == 200


async def test_forward_done_before_its_undo_stays_replayable(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    order, key = order_id(), new_key()
    first = await post(http, "/shipping/ship", ship_body(order), key)
    cancel = {"order_id": order, "ship_key": key, "shipment_id": first.json()["shipment_id"]}
    assert (await post(http, "/shipping/cancel", cancel, new_key())).status_code == 200
    replay = await post(http, "/shipping/ship", ship_body(order), key)
    assert replay.status_code == 200 and replay.content == first.content
    assert replay.headers["idempotent-replayed"] == "true"
    assert rows(await admin.ledger(order)) == [("shipping", "ship"), ("shipping", "cancel")]


async def test_forward_and_undo_racing_stay_consistent(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    for _ in range(10):
        order, key = order_id(), new_key()
        charge, refund = await asyncio.gather(
            post(http, "/payment/charge", charge_body(order), key),
            post(http, "/payment/refund", {"order_id": order, "charge_key": key}, new_key()),
        )
        actions = [entry.action for entry in await admin.ledger(order)]
        if refund.status_code == 422:
            # The charge came first: a refund must then name it, and this one could not.
            assert refund.json()["error"] == "charge_id_required"
            assert charge.status_code == 200 and actions == ["charge"]
        else:
            assert refund.json() == {"refunded": False, "amount_cents": 0}
            assert charge.status_code == 409 and charge.json()["error"] == "voided" and actions == []


async def test_a_lookup_that_finds_nothing_voids_the_key(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    """An undo sends nothing on a lookup's "nothing done": the request still on its way under
    that key must then never take effect."""
    order, key = order_id(), new_key()
    found = await http.get("/payment/lookup", params={"idempotency_key": key})
    assert found.status_code == 200 and found.json() == {"charge_id": None}
    late = await post(http, "/payment/charge", charge_body(order), key)
    assert late.status_code == 409 and late.json()["error"] == "voided"
    assert await admin.ledger(order) == []


async def test_a_lookup_that_finds_the_effect_leaves_the_key_alone(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    order, key = order_id(), new_key()
    first = await post(http, "/inventory/reserve", reserve_body(order), key)
    found = await http.get("/inventory/lookup", params={"idempotency_key": key})
    assert found.json() == {"reservation_id": first.json()["reservation_id"]}
    again = await post(http, "/inventory/reserve", reserve_body(order), key)
    assert again.status_code == 200 and again.content == first.content


async def test_a_lookup_while_a_slow_forward_is_served_waits_for_it_and_names_its_effect(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    """The contract's in-flight rule: a lookup of a key whose request is still being served
    waits for it (or answers in_flight), never "nothing". The lookup is sent only once the
    forward is inside its injected delay, holding its key, and the delay is lifted only once
    the lookup is seen waiting for that key: so the lookup meets the forward mid-flight."""
    order, key = order_id(), new_key()
    fault = await admin.add_fault("payment.charge", "latency", latency_ms=60_000, match_order_id=order)
    charge = asyncio.ensure_future(post(http, "/payment/charge", charge_body(order), key))
    try:
        # The rule is counted under the key's lock: one hit is the forward holding the key.
        await eventually(
            admin.faults,
            lambda rules: any(r["id"] == fault and r["hits"] == 1 for r in rules),
            timeout=10,
            what="the forward in its fault",
        )
        assert not charge.done()
        found = asyncio.ensure_future(http.get("/payment/lookup", params={"idempotency_key": key}))
        # Either the lookup answered already (it did not wait: wrong, asserted below), or it
        # waits for the key beside the forward that holds it.
        await eventually(
            admin.in_flight,
            lambda held: found.done() or held.get(key) == 2,
            timeout=10,
            what="the lookup waiting for the key",
        )
        assert not charge.done()
        await admin.remove_fault(fault)  # the delay ends: the forward is served
        charged, looked_up = await charge, await found
    finally:
        charge.cancel()
    assert charged.status_code == 200, charged.text
    assert looked_up.status_code == 200 and looked_up.json() == {"charge_id": charged.json()["charge_id"]}
    assert [entry.action for entry in await admin.ledger(order)] == ["charge"]
    assert await admin.in_flight() == {}


async def test_a_lookup_while_a_forward_hangs_waits_for_it_to_end(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    """A hang is served under the key as a delay is: the lookup waits until the hung request
    ends (here it gives up with no effect), and only then says nothing and voids the key."""
    order, key = order_id(), new_key()
    fault = await admin.add_fault("payment.charge", "hang", hang_s=60, match_order_id=order)
    charge = asyncio.ensure_future(post(http, "/payment/charge", charge_body(order), key))
    try:
        await eventually(
            admin.faults,
            lambda rules: any(r["id"] == fault and r["hits"] == 1 for r in rules),
            timeout=10,
            what="the forward in its fault",
        )
        found = asyncio.ensure_future(http.get("/payment/lookup", params={"idempotency_key": key}))
        await eventually(
            admin.in_flight,
            lambda held: found.done() or held.get(key) == 2,
            timeout=10,
            what="the lookup waiting for the key",
        )
        assert not found.done(), found.result().text
        await admin.remove_fault(fault)  # the hang ends, with no effect
        hung, looked_up = await charge, await found
    finally:
        charge.cancel()
    assert hung.status_code == 504
    assert looked_up.json() == {"charge_id": None}
    late = await post(http, "/payment/charge", charge_body(order), key)
    assert late.status_code == 409 and late.json()["error"] == "voided"
    assert await admin.ledger(order) == []


# --- faults -----------------------------------------------------------------------


async def test_transient_once_then_same_key_succeeds(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    fault = await admin.add_fault("payment.charge", "transient", times=1, match_order_id=order)
    failed = await post(http, "/payment/charge", charge_body(order), key)
    assert failed.status_code == 503 and failed.json()["error"]
    assert await admin.ledger(order) == []
    ok = await post(http, "/payment/charge", charge_body(order), key)
    assert ok.status_code == 200 and "idempotent-replayed" not in ok.headers
    assert len(await admin.ledger(order)) == 1
    (rule,) = [r for r in await admin.faults() if r["id"] == fault]
    assert rule["remaining"] == 0 and rule["hits"] == 1


async def test_transient_with_custom_status(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault(
        "inventory.reserve", "transient", status=429, error="slow_down", message="easy", match_order_id=order
    )
    response = await post(http, "/inventory/reserve", reserve_body(order), new_key())
    assert response.status_code == 429 and response.json() == {"error": "slow_down", "message": "easy"}


async def test_permanent_fault(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("shipping.ship", "permanent", status=422, error="address_rejected", match_order_id=order)
    response = await post(http, "/shipping/ship", ship_body(order), new_key())
    assert response.status_code == 422 and response.json()["error"] == "address_rejected"
    await admin.add_fault("payment.charge", "permanent", match_order_id=order)
    default = await post(http, "/payment/charge", charge_body(order), new_key())
    assert default.status_code == 422 and default.json()["error"] == "rejected"
    assert await admin.ledger(order) == []


async def test_order_prefix_fault_hits_only_matching_orders(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    prefix = f"{order_id()}-fail-"
    await admin.add_fault("payment.charge", "permanent", match_order_prefix=prefix)
    hit = await post(http, "/payment/charge", charge_body(f"{prefix}1"), new_key())
    assert hit.status_code == 422 and hit.json()["error"] == "rejected"
    spared = order_id()
    missed = await post(http, "/payment/charge", charge_body(spared), new_key())
    assert missed.status_code == 200
    assert len(await admin.ledger(spared)) == 1 and await admin.ledger(f"{prefix}1") == []


async def test_an_empty_order_prefix_is_refused(http: httpx.AsyncClient) -> None:
    rule = {"endpoint": "payment.charge", "kind": "permanent", "match_order_prefix": ""}
    response = await http.post("/admin/faults", json=rule)
    assert response.status_code == 422


async def test_lost_response_then_retry_replays(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    await admin.add_fault("payment.charge", "lost_response", times=1, match_order_id=order)
    lost = await post(http, "/payment/charge", charge_body(order), key)
    assert lost.status_code == 500
    assert len(await admin.ledger(order)) == 1  # the effect happened all the same
    retry = await post(http, "/payment/charge", charge_body(order), key)
    assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
    (entry,) = await admin.ledger(order)
    assert entry.idempotency_key == key


async def test_hang_with_client_timeout_has_no_effect(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, key = order_id(), new_key()
    await admin.add_fault("shipping.ship", "hang", hang_s=60, times=1, match_order_id=order)
    with pytest.raises(httpx.ReadTimeout):
        await post(http, "/shipping/ship", ship_body(order), key, timeout=0.3)
    assert await admin.ledger(order) == []
    ok = await post(http, "/shipping/ship", ship_body(order), key)
    assert ok.status_code == 200
    assert len(await admin.ledger(order)) == 1


async def test_hang_that_runs_out_answers_504(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("shipping.ship", "hang", hang_s=0.05, match_order_id=order)
    response = await post(http, "/shipping/ship", ship_body(order), new_key())
    assert response.status_code == 504 and response.json()["error"] == "timeout"
    assert await admin.ledger(order) == []


async def test_down_affects_every_endpoint_but_health(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order, other = order_id(), order_id()
    await admin.add_fault("*", "down", match_order_id=order)
    calls = [
        ("/inventory/reserve", reserve_body(order)),
        ("/payment/charge", charge_body(order)),
        ("/payment/refund", {"order_id": order, "charge_key": "k"}),
        ("/shipping/ship", ship_body(order)),
    ]
    for path, body in calls:
        response = await post(http, path, body, new_key())
        assert response.status_code == 503 and response.json()["error"] == "service_down", path
    assert (await http.get("/healthz")).status_code == 200
    assert (await post(http, "/shipping/ship", ship_body(other), new_key())).status_code == 200
    assert await admin.ledger(order) == []


async def test_service_wildcard(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("payment.*", "down", match_order_id=order)
    assert (await post(http, "/payment/refund", {"order_id": order, "charge_key": "k"}, new_key())).status_code == 503
    assert (await post(http, "/shipping/ship", ship_body(order), new_key())).status_code == 200


async def test_garbage(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("inventory.reserve", "garbage", match_order_id=order)
    response = await post(http, "/inventory/reserve", reserve_body(order), new_key())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    with pytest.raises(ValueError):
        response.json()
    assert await admin.ledger(order) == []


async def test_latency_then_normal(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    """A latency fault delays the call, then it is served as usual: one charge, once."""
    order, key = order_id(), new_key()
    rule = await admin.add_fault("payment.charge", "latency", latency_ms=50, match_order_id=order)
    response = await post(http, "/payment/charge", charge_body(order), key)
    assert response.status_code == 200, response.text
    assert response.json()["amount_cents"] == 1999 and response.json()["charge_id"]
    [entry] = await admin.ledger(order)
    assert (entry.service, entry.action, entry.idempotency_key, entry.amount_cents) == ("payment", "charge", key, 1999)
    # The rule did fire on that call (it is what delayed it), and only once.
    assert {r["id"]: r["hits"] for r in await admin.faults()}[rule] == 1


async def test_match_order_id_only_affects_that_order(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    target, bystander = order_id(), order_id()
    rule = await admin.add_fault("payment.charge", "transient", match_order_id=target)
    spared = await post(http, "/payment/charge", charge_body(bystander), new_key())
    assert spared.status_code == 200, spared.text
    hit = await post(http, "/payment/charge", charge_body(target), new_key())
    assert hit.status_code == 503 and hit.json()["error"], hit.text
    assert rows(await admin.ledger(bystander)) == [("payment", "charge")]
    assert await admin.ledger(target) == []  # a transient fault has no effect
    assert {r["id"]: r["hits"] for r in await admin.faults()}[rule] == 1  # the bystander's call did not count


async def test_probability_zero_never_fires(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("payment.charge", "transient", probability=0.0, match_order_id=order)
    for _ in range(5):
        assert (await post(http, "/payment/charge", charge_body(order), new_key())).status_code == 200


async def test_rules_apply_in_order(http: httpx.AsyncClient, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    await admin.add_fault("payment.charge", "permanent", error="first", times=1, match_order_id=order)
    await admin.add_fault("payment.charge", "permanent", error="second", times=1, match_order_id=order)
    errors = [
        (await post(http, "/payment/charge", charge_body(order), new_key())).json().get("error") for _ in range(3)
    ]
    assert errors == ["first", "second", None]


async def test_admin_fault_crud_and_validation(admin: RemoteServicesAdmin, http: httpx.AsyncClient) -> None:
    first = await admin.add_fault("payment.charge", "transient", match_order_id=order_id())
    second = await admin.add_fault("*", "latency", latency_ms=1, match_order_id=order_id())
    assert [r["id"] for r in await admin.faults()] == [first, second]
    assert await admin.remove_fault(first) is True
    assert await admin.remove_fault(first) is False
    assert [r["id"] for r in await admin.faults()] == [second]
    assert await admin.clear_faults() == 1
    assert await admin.faults() == []

    missing = await http.delete("/admin/faults/nope")
    assert missing.status_code == 404 and missing.json()["error"] == "fault_not_found"
    bad_rules: list[dict[str, Any]] = [
        {"endpoint": "payment.teleport", "kind": "transient"},
        {"endpoint": "payment.charge", "kind": "explode"},
        {"endpoint": "payment.charge", "kind": "latency"},
        {"endpoint": "payment.charge", "kind": "transient", "status": 404},
        {"endpoint": "payment.charge", "kind": "permanent", "status": 503},
        {"endpoint": "payment.charge", "kind": "transient", "probability": 2},
        {"endpoint": "payment.charge", "kind": "transient", "tims": 1},
    ]
    for rule in bad_rules:
        response = await http.post("/admin/faults", json=rule)
        assert response.status_code == 422, rule
        assert response.json()["error"] == "invalid_request" and response.json()["message"]
    with pytest.raises(RemoteServicesError) as raised:
        await admin.add_fault("nowhere.at_all", "down")
    assert raised.value.status == 422 and "unknown endpoint" in raised.value.message


# --- admin token and body limit -------------------------------------------------


ADMIN_CALLS = [
    ("POST", "/admin/faults"),
    ("GET", "/admin/faults"),
    ("DELETE", "/admin/faults"),
    ("DELETE", "/admin/faults/x"),
    ("POST", "/admin/reset"),
]


async def test_admin_calls_without_the_token_are_refused(service: ServiceProcess, admin: RemoteServicesAdmin) -> None:
    order = order_id()
    async with httpx.AsyncClient(base_url=service.url, timeout=10.0) as anyone:
        await post(anyone, "/shipping/ship", ship_body(order), new_key())
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": service.admin_token or ""}):
            for method, path in ADMIN_CALLS:
                response = await anyone.request(method, path, json={"endpoint": "*", "kind": "down"}, headers=headers)
                assert response.status_code == 401, (method, path, headers)
                assert response.json()["error"] == "unauthorized"
                assert response.headers["www-authenticate"] == "Bearer"
    # Nothing happened: no rule added, the ledger not reset (the SSRF wiped it).
    assert await admin.faults() == []
    assert rows(await admin.ledger(order)) == [("shipping", "ship")]


async def test_admin_calls_with_the_token_are_accepted(service: ServiceProcess) -> None:
    async with httpx.AsyncClient(base_url=service.url, headers=service.admin_headers, timeout=10.0) as operator:
        added = await operator.post("/admin/faults", json={"endpoint": "payment.charge", "kind": "down"})
        assert added.status_code == 201
        listed = (await operator.get("/admin/faults")).json()["faults"]
        assert [r["id"] for r in listed] == [added.json()["id"]]
        assert (await operator.delete("/admin/faults")).json() == {"cleared": 1}


def test_faults_cannot_be_enabled_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SAS_SERVICES__ADMIN_TOKEN"}
    env["PYTHONPATH"] = str(ROOT)
    command = [
        sys.executable,
        "-m",
        "sas_demo_services",
        "--port",
        str(free_port()),
        "--ledger",
        str(tmp_path / "l.db"),
    ]
    result = subprocess.run([*command, "--enable-faults"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "SAS_SERVICES__ADMIN_TOKEN" in result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_body_over_the_limit_is_refused_with_413(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin, chunked: bool
) -> None:
    order = order_id()
    body = ship_body(order, address="x" * 70_000)  # over the 64 KiB default
    raw = json.dumps(body).encode()
    headers = {"Idempotency-Key": new_key(), "Content-Type": "application/json"}

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), 8192):
            yield raw[start : start + 8192]

    # Declared length, or a chunked body with no length: refused either way, before any effect.
    response = await http.post("/shipping/ship", content=chunks() if chunked else raw, headers=headers)
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert await admin.ledger(order) == []
    faults = await http.post("/admin/faults", content=b" " * 70_000, headers={"Content-Type": "application/json"})
    assert faults.status_code == 413


# --- process lifecycle ------------------------------------------------------------


async def test_admin_routes_404_when_faults_disabled(tmp_path: Path) -> None:
    with start_service_process(free_port(), str(tmp_path / "ledger.db"), enable_faults=False) as plain:
        async with httpx.AsyncClient(base_url=plain.url) as http:
            for method, path in [
                ("POST", "/admin/faults"),
                ("GET", "/admin/faults"),
                ("DELETE", "/admin/faults"),
                ("DELETE", "/admin/faults/x"),
                ("POST", "/admin/reset"),
            ]:
                response = await http.request(method, path, json={"endpoint": "*", "kind": "down"})
                assert response.status_code == 404, (method, path)
                assert response.json()["error"] == "not_found"
            # The business side works as usual.
            order = order_id()
            assert (await post(http, "/shipping/ship", ship_body(order), new_key())).status_code == 200
        async with RemoteServicesAdmin(plain.url) as helper:
            assert len(await helper.ledger(order)) == 1


async def test_reset_and_stop(tmp_path: Path) -> None:
    process = start_service_process(free_port(), str(tmp_path / "ledger.db"))
    with process:
        async with (
            RemoteServicesAdmin(process.url, admin_token=process.admin_token) as helper,
            httpx.AsyncClient(base_url=process.url) as http,
        ):
            assert await helper.health()
            order, key = order_id(), new_key()
            await post(http, "/shipping/ship", ship_body(order), key)
            await helper.add_fault("*", "down")
            await helper.reset()
            assert await helper.faults() == [] and await helper.ledger() == []
            # The idempotency store went too: the key takes effect afresh.
            again = await post(http, "/shipping/ship", ship_body(order), key)
            assert again.status_code == 200 and "idempotent-replayed" not in again.headers
    assert not process.running
    assert process_gone(process.pid)
    assert not probe_health(process.url, timeout_s=0.5)
    async with RemoteServicesAdmin(process.url) as helper:
        assert await helper.health() is False


def test_kill(tmp_path: Path) -> None:
    process = start_service_process(free_port(), str(tmp_path / "ledger.db"))
    assert process.running and probe_health(process.url)
    assert process.kill() == -signal.SIGKILL
    assert process_gone(process.pid)
    process.stop()  # harmless afterwards


def test_child_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys, time\n"
        "from sas_demo_services.launcher import free_port, start_service_process\n"
        f"service = start_service_process(free_port(), {str(tmp_path / 'ledger.db')!r})\n"
        "print(service.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = 0
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert not process_gone(child_pid)
        parent.kill()
        parent.wait()
        wait_until(lambda: process_gone(child_pid), what="the orphaned service to die")
    finally:
        parent.kill()
        parent.wait()
        if child_pid and not process_gone(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_start_failure_reports_log_tail(tmp_path: Path) -> None:
    with pytest.raises(ServiceStartError, match="cannot open ledger"):
        start_service_process(free_port(), str(tmp_path), log_path=str(tmp_path / "service.log"))


def _run_main(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SAS_SERVICES_")}
    environment.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "sas_demo_services", *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--port", "abc", "--ledger", "x.db"], {}, "not a port number"),
        (["--port", "70000", "--ledger", "x.db"], {}, "between 1 and 65535"),
        ([], {}, "--ledger is required"),
        (["--ledger", "x.db"], {"SAS_SERVICES_ENABLE_FAULTS": "maybe"}, "SAS_SERVICES_ENABLE_FAULTS"),
    ],
)
def test_cli_rejects_bad_arguments(args: list[str], env: dict[str, str], expected: str) -> None:
    result = _run_main(args, **env)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


async def test_removing_a_latency_rule_ends_the_delay_of_the_calls_it_holds(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    """The service comes back: a call held by a latency rule goes on (its effect made once) as soon
    as the rule is removed, not when its delay would have run out."""
    order, key = order_id(), new_key()
    rule = await admin.add_fault("payment.charge", "latency", latency_ms=600_000, match_order_id=order)
    call = asyncio.ensure_future(post(http, "/payment/charge", charge_body(order), key, timeout=120))
    await eventually(admin.faults, lambda rules: any(r["id"] == rule and r["hits"] == 1 for r in rules), what="held")
    assert not call.done() and await admin.ledger(order) == []
    assert await admin.remove_fault(rule) is True
    response = await asyncio.wait_for(call, timeout=60)
    assert response.status_code == 200, response.text
    assert len(await admin.ledger(order)) == 1


async def test_removing_a_hang_rule_ends_the_stall_with_no_effect(
    http: httpx.AsyncClient, admin: RemoteServicesAdmin
) -> None:
    order = order_id()
    rule = await admin.add_fault("shipping.ship", "hang", hang_s=3600, match_order_id=order)
    call = asyncio.ensure_future(post(http, "/shipping/ship", ship_body(order), new_key(), timeout=120))
    await eventually(admin.faults, lambda rules: any(r["id"] == rule and r["hits"] == 1 for r in rules), what="held")
    assert await admin.remove_fault(rule) is True
    response = await asyncio.wait_for(call, timeout=60)
    assert response.status_code == 504 and response.json()["error"] == "timeout"
    assert await admin.ledger(order) == []
