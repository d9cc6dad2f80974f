"""The state store on each backend (``db_url``): migrated, with sessions and the hot-path writer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.agent_writes import make_step_writer
from sas.state_store.agent_writes.writer import StepWriter
from tests.stack import migrated


@pytest_asyncio.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    await migrated(db_url)
    engine = state_store.create_engine(DatabaseSettings(url=db_url))
    try:
        yield state_store.session_factory(engine)
    finally:
        await engine.dispose()


@pytest_asyncio.fixture
async def writer(sessions: async_sessionmaker[AsyncSession], db_url: str) -> AsyncIterator[StepWriter]:
    """The hot-path writer (acceptance, the Agents' writes), as the worker builds it."""
    made = make_step_writer(DatabaseSettings(url=db_url))
    try:
        yield made
    finally:
        await made.aclose()
