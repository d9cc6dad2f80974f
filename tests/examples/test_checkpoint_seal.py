"""A checkpoint resumes a retried attempt only if an Agent of sas sealed it. Any client of the
namespace may heartbeat a running activity with details of its own; a retry that skipped parcels
on that word would never ship them. An unsealed checkpoint is ignored, and the attempt starts
over, which sends nothing twice: each parcel has its own key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from sas.api.testing import run_agent
from sas_demo_services.launcher import ServiceProcess
from sas_orders.agents import ship
from tests.helpers import fresh_id

ORDER = {
    "customer_id": "c-1",
    "sku": "BOOK-1",
    "quantity": 1,
    "amount_cents": 1299,
    "address": "1 Main St",
    "parcels": 4,
}


async def shipped_parcels(url: str, order_id: str) -> list[int]:
    async with httpx.AsyncClient() as http:
        entries = (await http.get(f"{url}/ledger", params={"order_id": order_id})).json()["entries"]
    keys = [e["idempotency_key"] for e in entries if e["service"] == "shipping" and e["action"] == "ship"]
    return [int(k.rsplit("parcel-", 1)[1]) for k in keys if ":parcel-" in k]


@pytest.mark.parametrize(
    "forged",
    [
        {"checkpoint": {"parcels_done": 3}, "seal": "A" * 22},  # a seal of the forger's own making
        {"parcels_done": 3},  # no seal: what a checkpoint looked like before seals, or a forger's
    ],
    ids=["wrong-seal", "no-seal"],
)
async def test_a_checkpoint_no_agent_sealed_is_ignored_and_every_parcel_ships(
    services: ServiceProcess, forged: dict[str, Any]
) -> None:
    order_id = fresh_id("ckpt-forged")
    result = await run_agent(
        ship, services.url, task_id=order_id, step="ship", payload=ORDER, attempt=2, heartbeat_details=[forged]
    )
    assert result.data["shipment_id"]
    assert await shipped_parcels(services.url, order_id) == [1, 2, 3, 4]


async def test_a_checkpoint_an_agent_saved_resumes_after_the_parcels_done(services: ServiceProcess) -> None:
    order_id = fresh_id("ckpt-sealed")
    # As the earlier attempt's Agent saved it: sealed, as its heartbeat carries it.
    result = await run_agent(
        ship,
        services.url,
        task_id=order_id,
        step="ship",
        payload=ORDER,
        attempt=2,
        checkpoint={"parcels_done": 3},
    )
    assert result.data["shipment_id"]
    assert await shipped_parcels(services.url, order_id) == [4]
