"""Checkpoints: a step made of parts records its progress in Temporal's
heartbeat details, and a retried attempt resumes from the last checkpoint instead of starting over.

The ship step of an order with ``parcels`` ships each parcel by its own call (idempotency key
``<step key>:parcel-<i>``) and heartbeats ``{"parcels_done": i}`` after each one; here parcel 3
fails transiently once, on the real shipping service."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sas.task_models import TaskState
from tests.e2e.test_step_results import _agent_input
from tests.helpers import fresh_id
from tests.stack import ADMIN_HEADERS, Stack, order


async def _fault_hits(stack: Stack) -> dict[str, int]:
    async with httpx.AsyncClient() as http:
        response = await http.get(f"{stack.services_url}/admin/faults", headers=ADMIN_HEADERS)
        response.raise_for_status()
        return {rule["id"]: rule["hits"] for rule in response.json()["faults"]}


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "transient"},
        # A hung call: the attempt heartbeats while it waits, then times out. Those heartbeats
        # must carry the checkpoint, or the retry would start from parcel 1 again.
        {"kind": "hang"},
    ],
    ids=["fails", "hangs"],
)
async def test_a_retried_ship_step_resumes_after_the_parcels_already_shipped(
    stack: Stack, fault: dict[str, Any]
) -> None:
    task_id = fresh_id("ckpt")
    # Rules with no effect (0 ms latency) and no limit count every request for their parcel: a
    # call takes the first rule that matches, so parcel 3's counter sees only what its
    # one-off transient fault lets through.
    counters: dict[int, str] = {}
    for parcel in (1, 2):
        counters[parcel] = await stack.add_fault(
            endpoint="shipping.ship", kind="latency", latency_ms=0, match_order_id=task_id, match_parcel=parcel
        )
    fail_once = await stack.add_fault(
        endpoint="shipping.ship", times=1, match_order_id=task_id, match_parcel=3, **fault
    )
    for parcel in (3, 4):
        counters[parcel] = await stack.add_fault(
            endpoint="shipping.ship", kind="latency", latency_ms=0, match_order_id=task_id, match_parcel=parcel
        )

    handle = await stack.submit(task_id, order(parcels=4))
    result = await handle.result()

    assert result.state == TaskState.PROCESSED
    hits = await _fault_hits(stack)
    assert hits[fail_once] == 1  # the first attempt failed at parcel 3...
    # ...and the retry did not send parcels 1 and 2 again: each was requested once, in all.
    assert {parcel: hits[counters[parcel]] for parcel in (1, 2, 3, 4)} == {1: 1, 2: 1, 3: 1, 4: 1}

    ship_key = await _ship_key(stack, task_id)
    shipped: list[dict[str, Any]] = [
        e for e in await stack.ledger(task_id) if e["service"] == "shipping" and e["action"] == "ship"
    ]
    keys = [e["idempotency_key"] for e in shipped]
    # Each parcel shipped exactly once under its own key, then the shipment under the step's key.
    assert keys == [f"{ship_key}:parcel-{i}" for i in (1, 2, 3, 4)] + [ship_key]
    assert [e["provider_id"][:4] for e in shipped] == ["prc_"] * 4 + ["shp_"]


async def test_an_order_without_parcels_ships_in_one_call(stack: Stack) -> None:
    """Backward compatible: an order that does not say ``parcels`` ships as before, one call."""
    task_id = fresh_id("ckpt-one")
    payload = order().model_dump(mode="json", exclude={"parcels"})
    result = await (await stack.submit(task_id, payload)).result()

    assert result.state == TaskState.PROCESSED
    shipped = [e for e in await stack.ledger(task_id) if e["service"] == "shipping"]
    assert [e["idempotency_key"] for e in shipped] == [await _ship_key(stack, task_id)]


async def _ship_key(stack: Stack, task_id: str) -> str:
    """The ship step's idempotency key, as the Scheduler handed it to the Agent."""
    return (await _agent_input(stack, task_id, "shipping.ship")).idempotency_key
