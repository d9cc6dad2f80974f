"""Per-key locks, so a forward call and the compensation that undoes it never interleave."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class KeyLocks:
    """Named asyncio locks that exist only while someone holds or awaits them."""

    def __init__(self) -> None:
        self._slots: dict[str, _Slot] = {}

    @asynccontextmanager
    async def hold(self, *keys: str) -> AsyncIterator[None]:
        """Hold the locks of all ``keys`` for the duration of the block.

        Keys are taken in sorted order so two callers wanting overlapping sets cannot
        deadlock.

        Args:
            *keys: Lock names; duplicates are fine.
        """
        names = sorted(set(keys))
        slots = [self._checkout(name) for name in names]
        held: list[_Slot] = []
        try:
            for slot in slots:
                await slot.lock.acquire()
                held.append(slot)
            yield
        finally:
            for slot in reversed(held):
                slot.lock.release()
            for name in names:
                self._checkin(name)

    def _checkout(self, name: str) -> _Slot:
        slot = self._slots.setdefault(name, _Slot())
        slot.users += 1
        return slot

    def _checkin(self, name: str) -> None:
        slot = self._slots[name]
        slot.users -= 1
        if slot.users == 0:
            # Forget idle keys, or a long chaos run would keep one lock per key ever seen.
            del self._slots[name]

    def __len__(self) -> int:
        return len(self._slots)

    def in_flight(self) -> dict[str, int]:
        """Each key held or waited for, and by how many requests (the holder among them): what a
        test waits on to know a request is being served under a key, and that another waits."""
        return {name: slot.users for name, slot in self._slots.items()}
