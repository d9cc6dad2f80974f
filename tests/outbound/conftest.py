from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.outbound.receivers import Receiver, serve_receiver
from tests.supervisor.conftest import make_rig  # noqa: F401 - the Supervisor rig, for the alert webhook cases


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async for running in serve_receiver():
        yield running
