"""What every writer of the Agents' rows offers (``StepWriter``), and the writes nobody waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Protocol

from sas.task_models import AcceptOutcome, StepTransition, TaskAccepted


class StepWriter(Protocol):
    async def accept(self, accepted: TaskAccepted) -> AcceptOutcome:
        """Write the task row and its step rows (Pending) in one transaction, or say who owns the id."""
        ...

    async def write(self, t: StepTransition) -> None: ...

    def behind(self, write: Awaitable[None]) -> None:
        """Run a write its caller does not wait for; ``aclose`` waits for it first."""
        ...

    async def aclose(self) -> None: ...


class WritesBehind:
    """The writes nobody waits for (``StepWriter.behind``): kept referenced until they end, so
    that none is collected half done, and waited for, within ``_SETTLE_S``, when the writer
    closes, so that a worker stopping does not drop what it has already answered."""

    _SETTLE_S = 30.0

    def __init__(self) -> None:
        self._behind: set[asyncio.Future[None]] = set()

    def behind(self, write: Awaitable[None]) -> None:
        task = asyncio.ensure_future(write)
        self._behind.add(task)
        task.add_done_callback(self._behind.discard)

    async def _settle(self) -> None:
        if self._behind:
            await asyncio.wait(set(self._behind), timeout=self._SETTLE_S)
