"""A worker has at most one wake in flight per Supervisor (activities/supervisor_wakes.py): a burst
of recorded failures costs the Supervisor two signals, not one per failure, and the last wake
always leaves after the last failure was recorded. The wake reaching a real Supervisor is
tests/supervisor/test_detections.py::test_a_failure_wakes_the_supervisor_from_its_record_not_from_the_task."""

from __future__ import annotations

import asyncio
from typing import Any

from sas.activities.supervisor_wakes import SupervisorWakes
from tests.helpers import wait_until


class _HeldSignals:
    """Stands for the Temporal client: records each signal, and holds it until released."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.release = asyncio.Event()
        self.fail = False

    def get_workflow_handle(self, workflow_id: str) -> Any:
        client = self

        class _Handle:
            async def signal(self, name: str) -> None:
                client.sent.append((workflow_id, name))
                await client.release.wait()
                if client.fail:
                    raise RuntimeError("Temporal is not answering")

        return _Handle()


async def _settled(wakes: SupervisorWakes) -> None:
    await wait_until(lambda: asyncio.sleep(0, result=not wakes._sending), lambda idle: idle, what="no wake in flight")


async def test_failures_recorded_while_a_wake_is_on_its_way_share_one_wake_after_it() -> None:
    client, wakes = _HeldSignals(), SupervisorWakes()
    wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    await wait_until(lambda: asyncio.sleep(0, result=len(client.sent)), lambda n: n == 1, what="the first wake sent")
    for _ in range(9):
        wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    client.release.set()
    await _settled(wakes)
    # Nine failures recorded while the first wake was on its way: one more wake, sent after it.
    assert client.sent == [("sas-supervisor", "wake")] * 2


async def test_failures_recorded_before_the_wake_leaves_share_it() -> None:
    client, wakes = _HeldSignals(), SupervisorWakes()
    client.release.set()
    for _ in range(10):
        wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    await _settled(wakes)
    # All ten were written before the one wake left: it wakes the Supervisor after every one.
    assert client.sent == [("sas-supervisor", "wake")]


async def test_a_lone_failure_sends_one_wake_and_each_supervisor_has_its_own() -> None:
    client, wakes = _HeldSignals(), SupervisorWakes()
    client.release.set()
    wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    await _settled(wakes)
    assert client.sent == [("sas-supervisor", "wake")]
    client.release.clear()
    wakes.wake(client, "sas-supervisor-a")  # type: ignore[arg-type]
    wakes.wake(client, "sas-supervisor-b")  # type: ignore[arg-type]
    await wait_until(lambda: asyncio.sleep(0, result=len(client.sent)), lambda n: n == 3, what="both wakes sent")
    client.release.set()
    await _settled(wakes)
    assert sorted(client.sent[1:]) == [("sas-supervisor-a", "wake"), ("sas-supervisor-b", "wake")]


async def test_a_wake_temporal_refuses_is_dropped_and_the_next_failure_wakes_again() -> None:
    client, wakes = _HeldSignals(), SupervisorWakes()
    client.fail = True
    wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    client.release.set()
    await _settled(wakes)
    # No retry against a Temporal that does not answer (the next sweep finds the failures)...
    assert client.sent == [("sas-supervisor", "wake")]
    client.fail = False
    wakes.wake(client, "sas-supervisor")  # type: ignore[arg-type]
    await _settled(wakes)
    # ...and nothing of it is left behind to keep a later failure's wake from leaving.
    assert client.sent == [("sas-supervisor", "wake")] * 2
