"""The gate in front of a service's activity worker: while the service's breaker holds, the worker
does not ask Temporal for tasks.

It is the worker's activity slot supplier (``temporalio.worker.CustomSlotSupplier``): Temporal's
worker reserves a slot before every poll of the task queue, and ``reserve_slot`` waits while the
breaker is open. So no attempt starts: the service's tasks wait in its task queue, where the time
counts as schedule-to-start, not towards the step's complete-by (its start-to-close timeout), and
Temporal's retry policy spends no attempt. In half-open, one poll is let go, for the probe.
Once the breaker closes, each poll first waits its turn in the staged release of the held work
(``sas/breaker/release.py``): canaries, then growing waves, one release over every worker.

A poll already under way when the breaker opens may still bring a task: the Agent's caller
(``activities/remote.py``) then refuses to send it (``BreakerOpen``), so no request reaches the
service either way. The gate also bounds the calls in flight, as ``max_concurrent_activities``
would (a worker takes a tuner or that, not both).
"""

from __future__ import annotations

import asyncio
import threading

from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)

from sas.breaker.service import ServiceBreaker


class BreakerGate(CustomSlotSupplier):
    """At most ``slots`` activities of one service at a time, and none started while its breaker holds."""

    def __init__(self, breaker: ServiceBreaker, slots: int) -> None:
        self._breaker = breaker
        self._slots = slots
        self._used = 0
        # release_slot may be called from the SDK's own thread: the count is guarded, and the
        # waiters are woken on the worker's loop.
        self._lock = threading.Lock()
        self._freed = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        self._loop = asyncio.get_running_loop()
        while True:
            await self._breaker.until_poll_allowed()
            if self._take():
                try:
                    released = await self._breaker.release_turn()
                except BaseException:
                    self._give_back()
                    raise
                if released:
                    return SlotPermit()
                self._give_back()  # held again: the canaries failed
                continue
            freed = self._freed
            await freed.wait()

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        # Eager tasks (handed over without a poll) only while the breaker lets polls go freely.
        if self._breaker.holding() or self._breaker.releasing() or not self._take():
            return None
        return SlotPermit()

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        self._give_back()

    def _give_back(self) -> None:
        with self._lock:
            self._used -= 1
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake)

    def _take(self) -> bool:
        with self._lock:
            if self._used >= self._slots:
                return False
            self._used += 1
            return True

    def _wake(self) -> None:
        self._freed.set()
        self._freed = asyncio.Event()
