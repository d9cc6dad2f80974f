"""A fresh PostgreSQL database per test, on the server at 127.0.0.1:5432 (or SAS_TEST_PG_URL).

Without a reachable server the PostgreSQL tests skip and say why; in CI (``CI=true``) they fail,
so a missing server can never turn CI green with the PostgreSQL half of the suite unrun."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pytest
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get("SAS_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")


def _dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def _execute(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_dsn(PG_ADMIN_URL), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _run(sql: str) -> None:
    # Own thread and loop: fixtures may call this while the test loop is running.
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _execute(sql)).result()


@cache
def postgres_available() -> bool:
    try:
        _run("SELECT 1")
        return True
    except Exception:  # noqa: BLE001 - any failure means: not reachable
        return False


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_postgres() -> None:
    """Go on only with a reachable server: otherwise skip, or fail when running in CI."""
    if postgres_available():
        return
    where = make_url(PG_ADMIN_URL).render_as_string(hide_password=True)
    if in_ci():
        pytest.fail(
            f"PostgreSQL is not reachable at {where}, and CI=true: the PostgreSQL tests must run in CI "
            "(.ci/run starts a server and sets SAS_TEST_PG_URL)",
            pytrace=False,
        )
    pytest.skip(f"PostgreSQL is not reachable at {where} (set SAS_TEST_PG_URL, or start a server on 127.0.0.1:5432)")


@contextmanager
def fresh_database() -> Iterator[str]:
    name = f"sas_test_{uuid.uuid4().hex[:12]}"
    _run(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        _run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
