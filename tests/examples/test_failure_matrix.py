"""The failure matrix on the examples' task types, in the one-line form a team uses
(docs/task-types.md), and its checks shown to catch a run that breaks the promise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api.testing import FakeAgents, MatrixCase, check_failure_matrix, time_skipping_environment
from sas.api.testing._matrix_runner import MatrixRunner
from sas_orders.workflows import OrderWorkflow, PreorderWorkflow
from sas_trip.models import TripInput
from sas_trip.ticketed import TicketedTripWorkflow
from sas_trip.workflows import TripWorkflow

ORDER = {"customer_id": "c-1", "sku": "BOOK-1", "quantity": 1, "amount_cents": 1299, "address": "1 Main St"}
TRIP = TripInput(traveller="Ada", origin="LHR", destination="Lisbon", date="2027-05-01", nights=3)
BOOKED = {
    "flights.book": {"booking_id": "fl_1", "fare_cents": 12_000},
    "hotels.book": {"booking_id": "ht_1", "total_cents": 27_000},
    "cards.charge": {"charge_id": "ch_1", "amount_cents": 39_000},
}


@pytest_asyncio.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await time_skipping_environment()
    try:
        yield environment
    finally:
        await environment.shutdown()


def names(cases: list[MatrixCase]) -> list[str]:
    return [c.name for c in cases]


async def test_the_order_survives_every_failure_point(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(env, OrderWorkflow, ORDER)
    assert names(cases) == [
        "nothing fails",
        "reserve refused",
        "charge refused",
        "ship refused",
        "reserve's undo refused",
        "charge's undo refused",
    ]
    by_name = {c.name: c for c in cases}
    assert by_name["ship refused"].undone == ["payment.refund", "inventory.release"]
    # A refused step had no effect: its own undo is not sent (the lookup says nothing was done).
    assert by_name["charge refused"].undone == ["inventory.release"]


async def test_the_preorder_survives_every_failure_point(env: WorkflowEnvironment) -> None:
    preorder = {k: v for k, v in ORDER.items() if k != "address"}
    cases = await check_failure_matrix(env, PreorderWorkflow, preorder)
    assert names(cases) == ["nothing fails", "reserve refused", "charge refused", "reserve's undo refused"]


async def test_the_trip_survives_every_failure_point(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(env, TripWorkflow, TRIP, answers=BOOKED)
    assert all(c.passed for c in cases)
    assert [n for n in names(cases) if " refused before " not in n and " during " not in n and " after " not in n] == [
        "nothing fails",
        "flight refused",
        "hotel refused",
        "charge refused",
        "flight and hotel refused at once",
        "flight's undo refused",
        "hotel's undo refused",
    ]
    charge = next(c for c in cases if c.name == "charge refused")
    # Both bookings undone (in the order the workflow saw them complete, latest first).
    assert sorted(charge.undone) == ["flights.cancel", "hotels.cancel"]


def test_the_checks_catch_a_run_that_breaks_the_promise() -> None:
    """Effects a broken Scheduler might leave: an undo twice, undos not latest first, an undo
    with nothing to undo, an undo of a step never started."""
    runner = MatrixRunner(None, OrderWorkflow, OrderWorkflow.definition, {}, {}, 1)  # type: ignore[arg-type]
    twice = FakeAgents()
    twice.effects = [("inventory.reserve", "t:reserve"), ("inventory.release", "t:reserve:undo")] * 2
    twice.effects = [*twice.effects[:2], ("inventory.release", "t:reserve:undo")]
    assert "reserve undone 2 times" in runner._broken_promises(twice, "Compensated")
    out_of_order = FakeAgents()
    out_of_order.effects = [
        ("inventory.reserve", "t:reserve"),
        ("payment.charge", "t:charge"),
        ("inventory.release", "t:reserve:undo"),
        ("payment.refund", "t:charge:undo"),
    ]
    assert any("not latest first" in p for p in runner._broken_promises(out_of_order, "Compensated"))
    nothing = FakeAgents()
    nothing.effects = [("payment.refund", "t:charge:undo")]
    assert "charge undone with no effect to undo" in runner._broken_promises(nothing, "Compensated")
    missed = FakeAgents()
    missed.effects = [("inventory.reserve", "t:reserve")]
    assert "reserve undone 0 times" in runner._broken_promises(missed, "Compensated")


async def test_a_type_with_a_pivot_is_undone_before_it_and_parked_after_it(env: WorkflowEnvironment) -> None:
    """The ticketed trip, ``(flight ‖ hotel) → charge (pivot) → tickets``: a refusal up to the
    pivot undoes the task; the tickets refused past it park the task for an operator, nothing
    undone; the undo cases are driven by a refusal that may still undo (the charge's)."""
    answers: dict[str, Any] = {**BOOKED, "tickets.issue": {"ticket_id": "tk_1"}}
    cases = await check_failure_matrix(env, TicketedTripWorkflow, TRIP, answers=answers)
    assert all(c.passed for c in cases)
    by_name = {c.name: c for c in cases}
    assert by_name["charge refused"].outcome == "Compensated"
    tickets = by_name["tickets refused"]
    assert tickets.outcome == "parked" and tickets.undone == []
    assert "charge's undo refused" not in by_name  # the charge is the pivot: no later refusal undoes it
    assert {"flight's undo refused", "hotel's undo refused"} <= set(by_name)


def test_a_run_that_undoes_past_the_pivot_breaks_the_promise() -> None:
    from sas.api.testing._failure_matrix import _ended_as_promised, _past_pivot

    definition = TicketedTripWorkflow.definition
    case = MatrixCase("tickets refused", outcome="Compensated", undone=["cards.refund"])
    _ended_as_promised(case, _past_pivot(definition, [definition.step("tickets")]))  # type: ignore[list-item]
    assert case.problems == [
        "tickets is past the pivot, but the task ended Compensated, not parked",
        "undid ['cards.refund'] past the pivot",
    ]
