"""TLS to PostgreSQL is asked for in the URL (``?ssl=require`` / ``verify-full``) and honoured by
every path that connects: the engine (mirror, Supervisor, CLI, migrations) and the Agents'
driver-level writes. The test server here has no TLS, so a required TLS connection must fail."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from sas import state_store
from sas.settings import DatabaseSettings
from sas.state_store.agent_writes import make_step_writer
from sas.task_models import StepState, StepTransition
from tests.postgres import PG_ADMIN_URL, fresh_database

pytestmark = pytest.mark.usefixtures("postgres_required")


def url(ssl: str) -> str:
    return f"{PG_ADMIN_URL}?ssl={ssl}"


async def _engine_ssl_in_use(database_url: str) -> bool:
    engine = state_store.create_engine(DatabaseSettings(url=database_url))
    try:
        async with engine.connect() as conn:
            return bool(await conn.scalar(text("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")))
    finally:
        await engine.dispose()


async def test_required_tls_is_requested_by_the_engine() -> None:
    assert await _engine_ssl_in_use(url("disable")) is False
    with pytest.raises(Exception, match="SSL"):
        await _engine_ssl_in_use(url("require"))


async def test_required_tls_is_requested_by_the_agents_writes() -> None:
    transition = StepTransition(
        task_id="no-such-task", step="reserve", version=1, state=StepState.PROCESSING, at=datetime.now(UTC)
    )
    with fresh_database() as database_url:
        await state_store.upgrade_async(database_url)
        plain = make_step_writer(DatabaseSettings(url=f"{database_url}?ssl=disable"))
        try:
            await plain.write(transition)  # connects; updates nothing
        finally:
            await plain.aclose()
    secure = make_step_writer(DatabaseSettings(url=url("require")))
    try:
        with pytest.raises(Exception, match="SSL"):
            await secure.write(transition)
    finally:
        await secure.aclose()
