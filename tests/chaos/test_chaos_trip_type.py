"""The chaos run's trip type (bench/_chaos_trip.py) keeps the promise at every failure point
on its own, in the time-skipping environment with fake Agents (sas.api's failure matrix): so
what the chaos run finds under faults is the stack's doing, not a flaw of the type."""

from __future__ import annotations

from typing import Any

from bench._chaos_trip import ChaosTripWorkflow
from sas.api.testing import check_failure_matrix, time_skipping_environment

TRIP = {"traveller": "Ada", "destination": "Lisbon", "nights": 2, "insure": True}
ANSWERS: dict[str, dict[str, Any]] = {
    "chaos_air.book": {"booking_id": "fl_1", "cost_cents": 12_000},
    "chaos_hotel.book": {"booking_id": "ht_1", "cost_cents": 18_000},
    "chaos_bank.charge": {"charge_id": "ch_1", "amount_cents": 30_000},
    "chaos_insurer.cover": {"policy_id": "pol_1"},
}


async def test_the_chaos_trip_survives_every_failure_point() -> None:
    env = await time_skipping_environment()
    try:
        cases = await check_failure_matrix(env, ChaosTripWorkflow, TRIP, answers=ANSWERS)
    finally:
        await env.shutdown()
    by_name = {c.name: c for c in cases}
    assert by_name["nothing fails"].outcome == "Processed"
    # The insurer refusing (the last stage) undoes the charge, then both bookings.
    insure = by_name["insure refused"].undone
    assert insure[0] == "chaos_bank.refund" and sorted(insure[1:]) == ["chaos_air.cancel", "chaos_hotel.cancel"]
