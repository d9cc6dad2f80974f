"""Test helpers: waiting on conditions with a deadline, fresh ids."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
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


@asynccontextmanager
async def serving(app: Any, what: str = "the service") -> AsyncIterator[str]:
    """``app`` (an ASGI app: a team's service of a few lines) served on a free loopback port, for
    as long as the block runs; yields its base URL."""
    import uvicorn

    from sas_demo_services.launcher import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.ensure_future(server.serve())

    async def started() -> bool:
        return bool(server.started)

    await wait_until(started, timeout=30, what=what)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def forget_package(name: str) -> None:
    """Drop an imported package and its modules, so the next import reads them from ``sys.path``
    again: the docs' tests each write their own ``my_team`` package into their own folder, and a
    worker process that imported another test's would not find this one's modules in it."""
    import sys

    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def team_package(folder: Any, modules: dict[str, str]) -> None:
    """Write a team's ``my_team`` package (``modules``: file name to source) into ``folder`` and
    forget any ``my_team`` a test imported before; the caller puts ``folder`` on ``sys.path``."""
    package = folder / "my_team"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in modules.items():
        (package / name).write_text(source)
    forget_package("my_team")
