"""The ticketed trip end to end - ``(flight ‖ hotel) → charge (pivot) → tickets`` - on a real
Temporal dev server with the trip's own services, sas's worker and Supervisor as processes,
driven with ``sas``: a failure at or before the pivot undoes the bookings; a failure after it
is retried and parked, nothing undone; ``sas compensate`` is refused past the pivot, then done
with ``--force --reason``, and audited."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sas.task_models import StepState, TaskStatus
from tests.examples.test_trip import TRIP, TripStack, trip  # noqa: F401 - the stack's fixture (trip_services: conftest)
from tests.helpers import fresh_id, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("trip_example")]


async def submit(stack: TripStack, task_id: str, payload: dict[str, Any]) -> None:
    (stack.folder / f"{task_id}.json").write_text(json.dumps(payload))
    done = await stack.sas("submit", "--type", "ticketed_trip", "--input", f"{task_id}.json", "--id", task_id)
    assert done.returncode == 0, done.stderr


async def parked(stack: TripStack, task_id: str) -> TaskStatus:
    handle = stack.client.get_workflow_handle(task_id)
    return await wait_until(
        lambda: handle.query("status", result_type=TaskStatus),
        lambda s: any(x.name == "tickets" and x.state == StepState.ERROR for x in s.steps),
        timeout=120,
        what="the tickets parked for an operator",
    )


async def shown(stack: TripStack, task_id: str) -> dict[str, Any]:
    done = await stack.sas("show", task_id, "--json")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


async def test_a_declined_card_at_the_pivot_undoes_the_bookings(trip: TripStack) -> None:  # noqa: F811
    task_id = fresh_id("tt-declined")
    await submit(trip, task_id, {**TRIP, "card": "4000000000000002"})
    result = await trip.client.get_workflow_handle(task_id).result()
    assert result["state"] == "Compensated"
    # Refused for good, the charge did nothing: the bookings before it are undone, no refund sent.
    assert sorted(await trip.ledger(task_id)) == ["flights.book", "flights.cancel", "hotels.book", "hotels.cancel"]
    assert (await trip.mirror(task_id))["tickets"] == "Skipped"


async def test_tickets_refused_after_the_pivot_park_the_trip_and_only_a_forced_compensate_undoes_it(
    trip: TripStack,  # noqa: F811
) -> None:
    task_id = fresh_id("tt-nofly")
    await submit(trip, task_id, {**TRIP, "traveller": "Mallory"})
    await parked(trip, task_id)
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]  # nothing undone
    data = await shown(trip, task_id)
    assert {s["name"]: s["pivot"] for s in data["steps"]} == {
        "flight": None,
        "hotel": None,
        "charge": "pivot",
        "tickets": "forward_only",
    }
    assert [d["kind"] for d in data["decisions"]] == ["park"]  # a refusal past the pivot: parked, not undone
    table = await trip.sas("show", task_id)
    assert "charge (pivot)" in table.stdout and "tickets (forward" in table.stdout

    refused = await trip.sas("compensate", task_id, "--reason", "customer asks")
    assert refused.returncode != 0 and "past the point of no return" in refused.stderr, refused.stderr
    no_reason = await trip.sas("compensate", task_id, "--force")
    assert no_reason.returncode == 2 and "--force needs --reason" in no_reason.stderr
    assert "cards.refund" not in await trip.ledger(task_id)

    why = "no-fly: refund agreed with the customer"
    forced = await trip.sas("compensate", task_id, "--force", "--reason", why, "--by", "alice")
    assert forced.returncode == 0, forced.stderr
    result = await trip.client.get_workflow_handle(task_id).result()
    assert result["state"] == "Compensated"
    undone = await trip.ledger(task_id)
    assert sorted(undone[3:]) == ["cards.refund", "flights.cancel", "hotels.cancel"]  # the tickets were never issued
    [action] = [a for a in (await shown(trip, task_id))["operator_actions"] if a["action"] == "compensate --force"]
    assert action["actor"] == "alice" and action["reason"] == why
    assert "forced: step tickets, after the pivot charge, has run" in action["changed"]


async def test_tickets_unavailable_after_the_pivot_are_retried_then_parked_nothing_undone(
    trip: TripStack,  # noqa: F811
) -> None:
    task_id = fresh_id("tt-down")
    await trip.fault(endpoint="tickets.issue", kind="unavailable", times=1_000, trip=task_id)
    await submit(trip, task_id, TRIP)
    await parked(trip, task_id)
    kinds = [d["kind"] for d in (await shown(trip, task_id))["decisions"] if d["kind"] != "wait"]
    assert kinds[-1] == "park" and "retry" in kinds and "compensate" not in kinds
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]


async def test_a_trip_terminated_past_its_pivot_is_not_cleaned_up_and_an_operator_is_told(
    trip: TripStack,  # noqa: F811
) -> None:
    """Closed from outside (``temporal workflow terminate``) while its tickets are being issued:
    a clean-up would refund the charge, so none is decided; one critical alert says why."""
    task_id = fresh_id("tt-terminated")
    await trip.fault(endpoint="tickets.issue", kind="latency", latency_ms=600_000, trip=task_id)
    await submit(trip, task_id, TRIP)
    await wait_until(lambda: trip.mirror(task_id), lambda m: m.get("tickets") == "Processing", what="tickets issued")
    await trip.client.get_workflow_handle(task_id).terminate("an operator's mistake")

    async def alerts() -> list[dict[str, Any]]:
        listed = await trip.sas("alerts", "--json")
        return [a for a in json.loads(listed.stdout) if a["task_id"] == task_id]

    [alert] = await wait_until(alerts, lambda a: len(a) == 1, timeout=120, what="one alert for the trip")
    assert alert["kind"] == "closed_past_pivot" and "after the pivot charge, has run" in alert["message"]
    assert "nothing was undone" in alert["message"]
    decisions = [d["kind"] for d in (await shown(trip, task_id))["decisions"]]
    assert "cleanup" not in decisions
    assert sorted(await trip.ledger(task_id)) == ["cards.charge", "flights.book", "hotels.book"]
