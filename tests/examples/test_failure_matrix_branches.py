"""The failure matrix over a group with branches, the seated trip ``([flight → seat] ‖ hotel) →
charge``: every step refused, every two steps that run side by side timed against each other
(never two of one branch), every undo refused; and its check of the order within a branch
shown to catch a run that undoes a branch out of order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from sas.api.testing import check_failure_matrix, time_skipping_environment
from sas.api.testing._matrix_runner import _branch_order
from sas_trip.models import SeatedTripInput
from sas_trip.seated import SEATED_TRIP, SeatedTripWorkflow

TRIP = SeatedTripInput(traveller="Ada", origin="LHR", destination="Lisbon", date="2027-05-01", nights=3)
BOOKED: dict[str, Any] = {
    "flights.book": {"booking_id": "fl_1", "fare_cents": 12_000},
    "seats.reserve": {"booking_id": "st_1", "seat": "aisle"},
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


async def test_the_seated_trip_survives_every_failure_point_of_its_branches(env: WorkflowEnvironment) -> None:
    cases = await check_failure_matrix(env, SeatedTripWorkflow, TRIP, answers=BOOKED)
    by_name = {c.name: c for c in cases}
    timed = [n for n in by_name if " before " in n or " during " in n or " after " in n]
    # The hotel against each step of the flight's branch, both ways, at each timing; never the
    # flight against its own seat (the seat starts only once the flight is done).
    assert sorted({n.split(" refused ")[0] + "/" + n.split(" ")[-2].removesuffix("'s") for n in timed}) == [
        "flight/hotel",
        "hotel/flight",
        "hotel/seat",
        "seat/hotel",
    ]
    assert len(timed) == 12
    assert {"flight and hotel refused at once", "seat and hotel refused at once"} <= set(by_name)
    seat = by_name["seat refused"]
    assert sorted(seat.undone) == ["flights.cancel", "hotels.cancel"]  # the refused seat is not released
    charge = by_name["charge refused"]
    assert charge.undone.index("seats.release") < charge.undone.index("flights.cancel")  # latest first in its branch


def test_a_branch_undone_out_of_order_breaks_the_promise() -> None:
    assert _branch_order(SEATED_TRIP, ["seat", "hotel", "flight"]) == []
    assert _branch_order(SEATED_TRIP, ["hotel", "flight", "seat"]) == [
        "undos not latest first within the branch flight → seat: ['flight', 'seat']"
    ]
