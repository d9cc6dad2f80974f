"""Bulkheads: one hung remote service holds only its own pool and slots; the others go on.

Real Temporal, real remote services, real state store. Every service gets a pool of two
connections and shipping a limit of two calls in flight; shipping then hangs. With one shared
pool (as before the registry) the hung ship calls would hold every connection, and the
preorders' reserve and charge calls would queue behind them. Each service's Agents also run on
the service's own task queue (sas-tasks.shipping...): the third ship waits there, unstarted,
while the other services' queues are served.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import ApplicationErrorCategory
from temporalio.client import Client

from sas.activities import check_service_names, service_callers
from sas.settings import ServicesSettings
from sas.task_models import StepPolicyValues, TaskState
from sas.task_models.queues import SLOTS_FULL
from sas_demo_services.launcher import ServiceProcess
from sas_orders.models import PreorderInput
from tests.helpers import fresh_id, wait_until
from tests.outbound.receivers import Receiver, serve_receiver
from tests.replay.test_replay import HISTORIES
from tests.stack import ADMIN_TOKEN, Stack, start_stack

# The hang lasts until the test removes its faults (removing a rule ends the calls it holds), however
# slow a loaded machine is; a ship attempt outlasts it (so the hung calls stay in their first
# attempt) and is retried enough that an outage is waited out rather than turned into a refund.
# Its heartbeat timeout is long too: on a loaded machine a late beat timed out a hung attempt, and
# its retry took a second slot beside the first (which keeps its slot until its request ends).
HANG_MS = 300_000
# The HTTP timeout of one call outlasts the hang too: at the default 30 s, a loaded machine's slow
# start let a hung call time out and retry, finding its slot taken by the call that had waited.
CALL_TIMEOUT_S = 2 * HANG_MS / 1000
PATIENT_SHIP = StepPolicyValues(
    complete_by_s=600.0, heartbeat_s=20.0, max_attempts=10, initial_interval_s=0.2, backoff=1.5, max_interval_s=0.5
)
HUNG_ORDERS = 3  # one more than shipping's slots: the third waits in shipping's queue, unstarted
PREORDERS = 4


@pytest_asyncio.fixture
async def bulkhead_stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    registry = ServicesSettings(
        url=services.url,
        admin_token=ADMIN_TOKEN,
        max_connections=2,
        shipping={"max_concurrency": 2, "timeout_s": CALL_TIMEOUT_S},
    )
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, services=registry, steps={"ship": PATIENT_SHIP}
    ) as running:
        yield running


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async for running in serve_receiver():
        yield running


async def orders_hung_at_ship(stack: Stack, prefix: str) -> tuple[list[str], list[str], list[Any]]:
    """HUNG_ORDERS orders submitted, each with its ship call held at shipping: ids, faults, handles."""
    hung = [fresh_id(prefix) for _ in range(HUNG_ORDERS)]
    faults = [
        await stack.add_fault(endpoint="shipping.ship", kind="latency", latency_ms=HANG_MS, match_order_id=task_id)
        for task_id in hung
    ]
    return hung, faults, [await stack.submit(task_id) for task_id in hung]


async def preorders_complete(stack: Stack, prefix: str) -> None:
    """PREORDERS preorders (reserve, charge: no shipping) submitted, and each processed."""
    handles = [
        await stack.submit(
            fresh_id(prefix),
            payload=PreorderInput(customer_id="cust-1", sku="SKU-1", quantity=1, amount_cents=500),
            workflow="PreorderWorkflow",
        )
        for _ in range(PREORDERS)
    ]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=180)
    assert [r.state for r in results] == [TaskState.PROCESSED] * PREORDERS


async def shipping_back(stack: Stack, faults: list[str], hung: list[str], handles: list[Any]) -> None:
    """Shipping answers again: every hung order completes, none undone, each shipped once."""
    for fault_id in faults:
        await stack.remove_fault(fault_id)
    done = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=90)
    assert [r.state for r in done] == [TaskState.PROCESSED] * HUNG_ORDERS
    for task_id in hung:
        actions = [e["action"] for e in await stack.ledger(task_id)]
        assert actions == ["reserve", "charge", "ship"], actions


async def test_each_service_has_its_own_url_auth_header_and_pool(receiver: Receiver) -> None:
    base = receiver.url.removesuffix("/hook")
    registry = ServicesSettings(
        url="http://127.0.0.1:9",  # nothing listens: a service without its own URL is not called here
        payment={"url": base, "auth_header": "X-Api-Key", "auth_token": "pay-secret"},
    )
    async with service_callers(registry) as callers:
        # Every installed task type's services are called (CI installs the trip example too).
        assert {"inventory", "payment", "shipping"} <= set(callers)
        assert len({id(c._client) for c in callers.values()}) == len(callers)  # one pool per service
        answer = await callers["payment"].post(
            "/hook", {"order_id": "o-1"}, "o-1:charge", datetime.now(UTC) + timedelta(seconds=10)
        )
    assert answer == {"ok": True}
    [request] = receiver.received
    assert request.headers["x-api-key"] == "pay-secret"
    assert request.headers["idempotency-key"] == "o-1:charge"


def test_settings_for_a_service_no_agent_calls_are_refused() -> None:
    with pytest.raises(ValueError, match="SAS_SERVICES__SHIPING__"):
        check_service_names(ServicesSettings(shiping={"max_concurrency": 2}))


def test_each_service_is_declared_by_name_over_the_defaults() -> None:
    registry = ServicesSettings(
        url="http://127.0.0.1:1/",
        max_connections=7,
        payment={"url": "http://pay.example:2", "max_concurrency": 3, "auth_token": "Bearer t"},
    )
    payment, inventory = registry.service("payment"), registry.service("inventory")
    assert (payment.url, payment.max_connections, payment.max_concurrency) == ("http://pay.example:2", 7, 3)
    assert payment.auth_header == "Authorization" and payment.auth_token is not None
    assert (inventory.url, inventory.max_concurrency, inventory.auth_token) == ("http://127.0.0.1:1", 7, None)


async def test_a_hung_service_does_not_hold_up_steps_that_do_not_use_it(bulkhead_stack: Stack) -> None:
    stack = bulkhead_stack
    hung, faults, hung_handles = await orders_hung_at_ship(stack, "hung")

    async def ship_attempts() -> list[tuple[str, int] | None]:
        rows = []
        for task_id in hung:
            record = await stack.record(task_id)
            ship = next((s for s in record.steps if s.name == "ship"), None) if record else None
            rows.append(None if ship is None else (ship.state, ship.attempt))
        return rows

    # Two hung orders are in the first attempt of their ship step; the third's ship waits in
    # shipping's own task queue, no attempt started (its row still Pending).
    in_first_attempt = [("Pending", 0), ("Processing", 1), ("Processing", 1)]

    async def sorted_attempts() -> list[tuple[str, int] | None]:
        return sorted(await ship_attempts(), key=repr)

    async def in_ship() -> tuple[list[tuple[str, int] | None], list[tuple[str, int]]]:
        """The ship rows, and what the order whose ship row is Pending has in flight: a Pending row
        is also an order still at charge, so its scheduled activity tells the two apart."""
        rows = await ship_attempts()
        waiting: list[tuple[str, int]] = []
        for task_id, row in zip(hung, rows, strict=True):
            if row == ("Pending", 0):
                described = await stack.client.get_workflow_handle(task_id).describe()
                waiting += [(a.activity_type.name, a.attempt) for a in described.raw_description.pending_activities]
        return sorted(rows, key=repr), waiting

    await wait_until(
        in_ship, lambda seen: seen == (in_first_attempt, [("shipping.ship", 1)]), what="orders in ship, one queued"
    )

    await preorders_complete(stack, "pre")

    # The preorders finished while every hung order was still in the first attempt of its ship
    # step, with nothing undone. (With one pool shared by all services, the preorders' calls would
    # have waited for the hung calls to end, and these attempts would have moved on.)
    assert await sorted_attempts() == in_first_attempt
    for task_id in hung:
        assert await stack.task_state(task_id) == "Processing"
        assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge"]

    # Shipping comes back: the hung calls end, the order that waited for a slot gets one, and all
    # complete; none was compensated.
    await shipping_back(stack, faults, hung, hung_handles)


@pytest_asyncio.fixture
async def shared_queue_stack(
    client: Client, temporal_address: str, services: ServiceProcess, sqlite_url: str
) -> AsyncIterator[Stack]:
    # No limit, breaker or own_queue for shipping: its Agents share the workflow's queue, with
    # its pool (two connections) as its limit on calls in flight.
    registry = ServicesSettings(
        url=services.url, admin_token=ADMIN_TOKEN, max_connections=2, shipping={"timeout_s": CALL_TIMEOUT_S}
    )
    async with start_stack(
        client, temporal_address, services.url, sqlite_url, services=registry, steps={"ship": PATIENT_SHIP}
    ) as running:
        yield running


async def test_a_hung_service_sharing_the_workflow_queue_waits_in_its_own(shared_queue_stack: Stack) -> None:
    """Shipping shares the workflow's queue and hangs: two ship calls hold its two slots, and the
    third, finding them busy, is refused before it calls and started again on shipping's own
    queue, to wait there in Temporal rather than in a slot of the workflow worker. The other
    services' steps go on meanwhile; once shipping answers, every order completes, none undone,
    each shipped once."""
    stack = shared_queue_stack
    queue = stack.settings.temporal.task_queue
    hung, faults, hung_handles = await orders_hung_at_ship(stack, "hung-shared")

    async def ship_queues(task_id: str) -> list[tuple[str, str]]:
        """Where each ship attempt was scheduled, and how each that failed ended. Only ship's
        attempts count: on a loaded machine an earlier step may find its own pool full and be
        handed over too, which is not what this test is about."""
        seen = []
        ship_events: set[int] = set()
        async for event in stack.client.get_workflow_handle(task_id).fetch_history_events():
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name == "shipping.ship":
                    ship_events.add(event.event_id)
                    seen.append(("scheduled", scheduled.task_queue.name))
            elif event.HasField("activity_task_failed_event_attributes"):
                attributes = event.activity_task_failed_event_attributes
                if attributes.scheduled_event_id not in ship_events:
                    continue
                failed = attributes.failure.application_failure_info
                # A hand-over, not a failure: benign, so the worker logs no warning for it.
                benign = failed.category == ApplicationErrorCategory.APPLICATION_ERROR_CATEGORY_BENIGN
                seen.append(("failed", f"{failed.type}{' (benign)' if benign else ''}"))
        return seen

    async def all_queues() -> list[list[tuple[str, str]]]:
        return sorted([await ship_queues(task_id) for task_id in hung], key=len)

    # Two in their first attempt on the workflow's queue; the third refused there, now on shipping's.
    moved = [("scheduled", queue), ("failed", f"{SLOTS_FULL} (benign)"), ("scheduled", f"{queue}.shipping")]
    await wait_until(
        all_queues,
        lambda q: q == [[("scheduled", queue)], [("scheduled", queue)], moved],
        what="two ship calls in flight, the third moved to shipping's own queue",
    )

    await preorders_complete(stack, "pre-shared")
    for task_id in hung:
        assert await stack.task_state(task_id) == "Processing"
        assert [e["action"] for e in await stack.ledger(task_id)] == ["reserve", "charge"]
    # The refusal spent nothing: no failure counted, no decision taken.
    for task_id in hung:
        assert [d.kind for d in await stack.decisions(task_id) if d.kind != "wait"] == [], task_id

    await shipping_back(stack, faults, hung, hung_handles)
    if os.environ.get("SAS_RECORD_HISTORIES") == "1":  # for tests/replay: the order whose ship moved
        [moved_id] = [task_id for task_id in hung if len(await ship_queues(task_id)) == len(moved)]
        history = await stack.client.get_workflow_handle(moved_id).fetch_history()
        text = json.dumps(json.loads(history.to_json()), indent=1) + "\n"
        (HISTORIES / "order_held_in_service_queue.json").write_text(text)
