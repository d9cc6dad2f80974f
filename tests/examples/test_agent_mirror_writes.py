"""When an Agent's attempt returns, relative to its last mirror write: a forward step that does
not complete the task returns without waiting for its Processed row (the writer finishes it
behind, and waits for it when closed); the step that completes the task, and an undo, return
only once their row is written. The trip's flight booking, against its service on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from temporalio.testing import ActivityEnvironment

from sas.activities.http_agent import HttpAgent
from sas.activities.refused_writes import RefusedWrites
from sas.activities.remote import RemoteCaller
from sas.state_store.agent_writes.writer import WritesBehind
from sas.task_models import MirrorStamp, StepCall, StepResult, StepState, StepTransition, TaskState
from sas.task_types.services import HttpCall
from sas_trip.workflows import FLIGHT
from tests.helpers import fresh_id

TRIP = {"traveller": "Ada", "origin": "LHR", "destination": "Lisbon", "date": "2027-05-01"}
DONE = (StepState.PROCESSED, StepState.COMPENSATED)


class HeldWriter(WritesBehind):
    """Holds every Processed or Compensated write until released; keeps what landed."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.done_asked = asyncio.Event()
        self.landed: list[StepTransition] = []
        # Whether the held write was handed to ``behind`` (nobody waits for it) or is awaited by
        # the attempt, which then cannot return before it: known the moment it is held.
        self.held_behind: bool | None = None

    async def accept(self, accepted: Any) -> Any:  # pragma: no cover - Agents never accept
        raise NotImplementedError

    async def write(self, t: StepTransition) -> None:
        if t.state in DONE:
            self.held_behind = bool(self._behind)
            self.done_asked.set()
            await self.release.wait()
        self.landed.append(t)

    async def aclose(self) -> None:
        await self._settle()


async def attempt(url: str, writer: HeldWriter, *, undo: bool = False, completes: bool = False) -> StepResult:
    task_id = fresh_id("behind")
    call = StepCall(
        task_id=task_id,
        task_type="trip",
        step="flight",
        position=0,
        idempotency_key=f"{task_id}:flight:undo" if undo else f"{task_id}:flight",
        target_key=f"{task_id}:flight" if undo else None,
        compensation=undo,
        payload=TRIP,
        stamp=MirrorStamp(seq=1, task_state_on_done=TaskState.PROCESSED if completes else None),
        forward_result={"booking_id": "none-such"} if undo else None,
    )
    declared = FLIGHT.undo if undo else FLIGHT.forward
    assert isinstance(declared, HttpCall)
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info,
        activity_type=declared.name,
        started_time=datetime.now(UTC),
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=None,
    )
    async with httpx.AsyncClient() as client:
        remote = RemoteCaller(client, url, timeout_s=30, service="flights")
        [run] = HttpAgent(remote, writer, "sas-test", RefusedWrites(None)).activities([declared])  # type: ignore[arg-type]
        result: StepResult = await environment.run(run, call)
        return result


async def test_a_step_that_does_not_complete_the_task_returns_before_its_processed_row(trip_services: str) -> None:
    writer = HeldWriter()
    # Were the attempt waiting for its Processed row, it would wait here for ever.
    result = await asyncio.wait_for(attempt(trip_services, writer), timeout=60)
    assert result.data["booking_id"]
    assert writer.done_asked.is_set() and [t.state for t in writer.landed] == [StepState.PROCESSING]
    assert writer.held_behind is True
    writer.release.set()
    await writer.aclose()  # the writer waits for the write it holds behind
    assert [t.state for t in writer.landed] == [StepState.PROCESSING, StepState.PROCESSED]
    assert writer.landed[-1].result == result.data


async def test_the_step_that_completes_the_task_returns_only_once_its_row_is_written(trip_services: str) -> None:
    await returns_only_once_written(trip_services, undo=False)


async def test_an_undo_returns_only_once_its_row_is_written(trip_services: str) -> None:
    await returns_only_once_written(trip_services, undo=True)


async def returns_only_once_written(url: str, *, undo: bool) -> None:
    writer = HeldWriter()
    running = asyncio.ensure_future(attempt(url, writer, undo=undo, completes=not undo))
    try:
        await asyncio.wait_for(writer.done_asked.wait(), timeout=60)
        # The held write is the attempt's own await, not one written behind it: the attempt
        # cannot return until it is released, however long it is given.
        assert writer.held_behind is False
        assert not running.done()
        writer.release.set()
        await asyncio.wait_for(running, timeout=60)
        expected = StepState.COMPENSATED if undo else StepState.PROCESSED
        assert [t.state for t in writer.landed][-1] == expected
    finally:
        writer.release.set()
        running.cancel()
