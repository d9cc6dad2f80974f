"""FakeAgents' gates, on its fakes run as activities (Temporal's ActivityEnvironment): an
attempt cancelled before its call left sends nothing; one cancelled at its service waits for
the answer, whose effect lands, then ends cancelled, as the real Agent does; and while a call
is being served, its undo's lookup answers in_flight rather than "nothing was done"."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from sas.api import StepCall
from sas.api.testing import FakeAgents
from sas.task_models import MirrorStamp
from sas_trip.workflows import TRIP

KEY = "trip-gates:flight"


def call(*, undo: bool = False) -> StepCall:
    return StepCall(
        task_id="trip-gates",
        task_type="trip",
        step="flight",
        position=0,
        idempotency_key=f"{KEY}:undo" if undo else KEY,
        target_key=KEY if undo else None,
        compensation=undo,
        payload={"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01", "nights": 3},
        stamp=MirrorStamp(seq=1),
    )


def fakes(agents: FakeAgents) -> dict[str, Callable[..., Any]]:
    return {fn.__temporal_activity_definition.name: fn for fn in agents.activities(TRIP)}  # type: ignore[attr-defined]


async def held_at(agents: FakeAgents, point: dict[str, Any]) -> tuple[ActivityEnvironment, asyncio.Task[Any]]:
    """The flight's forward call started and held at ``point``; once it is held there."""
    arrived = asyncio.Event()

    async def hold(_: StepCall) -> None:
        arrived.set()
        await asyncio.get_running_loop().create_future()

    point["flights.book"] = hold
    env = ActivityEnvironment()
    attempt = asyncio.create_task(env.run(fakes(agents)["flights.book"], call()))
    await asyncio.wait_for(arrived.wait(), timeout=30)
    return env, attempt


async def test_an_attempt_cancelled_before_its_call_left_sends_nothing() -> None:
    agents = FakeAgents()
    env, attempt = await held_at(agents, agents.before_call)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert (agents.effects, agents.bodies, agents.cut_off) == ([], [], [])


async def test_an_attempt_cut_off_at_its_service_lands_then_ends_cancelled() -> None:
    agents = FakeAgents()
    env, attempt = await held_at(agents, agents.at_service)
    assert agents.serving == {KEY}
    with pytest.raises(ApplicationError, match="in_flight") as refused:
        await ActivityEnvironment().run(fakes(agents)["flights.cancel"], call(undo=True))
    assert not refused.value.non_retryable  # asked again, never decided on
    assert KEY not in agents.voided
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert agents.effects == [("flights.book", KEY)] and agents.cut_off == [("flights.book", KEY)]
    assert agents.serving == set()
    await ActivityEnvironment().run(fakes(agents)["flights.cancel"], call(undo=True))
    assert agents.undone() == ["flights.cancel"]
