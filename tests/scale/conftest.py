"""Scale tests: PostgreSQL and many processes. The PostgreSQL cases skip (and say why)
when no server is reachable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres import PG_ADMIN_URL, fresh_database, postgres_available


@pytest.fixture
def pg_url() -> Iterator[str]:
    if not postgres_available():
        pytest.skip(f"PostgreSQL is not reachable at {PG_ADMIN_URL}")
    with fresh_database() as url:
        yield url
