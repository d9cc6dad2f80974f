"""Test helpers: waiting on conditions with a deadline, fresh ids."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def fresh_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def wait_until(
    probe: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool] = bool,
    timeout: float = 60.0,
    interval: float = 0.2,
    what: str = "",
) -> T:
    """Poll ``probe`` until ``ok(result)``; fail with the last value seen after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await probe()
        if ok(last):
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or probe}; last value: {last!r}")
        await asyncio.sleep(interval)
